"""How the GitLab simulator's MR reads scale with merged history (chaos scenario 5's load).

Builds one project shaped like the chaos workload (every MR adds its own file, gets
one green pipeline and is merged with a merge commit), keeping OPEN MRs open
throughout (half opened before the merges, half after), then times, at each size:
listing the open MRs over HTTP (`per_page=100`), GET of one open MR, the Python
helper `merge_requests(state="opened")` the chaos CI thread used to call, and the
cost of one more merge. Medians of `--repeat` rounds.

Usage: python benchmarks/simulator_history.py [--merges 500,2000] [--repeat 5] [--json]
       [--profile FILE]  (cProfile of the reads at the largest size, sorted by cumulative time)
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

PROJECT = "bench/history"
TOKEN = "bench-token"  # noqa: S105 - the simulator's well-known token
OPEN = 100


def _open_mr(sim: GitLabSimulator, name: str) -> int:
    sim.push(PROJECT, name, {f"files/{name}.txt": f"{name}\n"}, message=f"Add {name}")
    iid = sim.create_merge_request(PROJECT, name, f"Change {name}", user="workqueue-bot")
    green = [JobSpec("unit-tests", status="success")]
    sim.create_pipeline(PROJECT, merge_request_iid=iid, jobs=green)
    return iid


def _merge_one(sim: GitLabSimulator, index: int) -> None:
    iid = _open_mr(sim, f"merged-{index}")
    sim.merge(PROJECT, iid)


def _expect(condition: bool) -> None:
    if not condition:
        raise RuntimeError("the simulator answered something unexpected")


def _median(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(sizes: list[int], repeat: int, profile: str | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with GitLabSimulator(token=TOKEN) as sim:
        project_id = sim.create_project(PROJECT, {"README.md": "# bench\n"})
        early = [_open_mr(sim, f"early-{i}") for i in range(OPEN // 2)]
        merged = 0
        client = httpx.Client(base_url=sim.api_url, headers={"PRIVATE-TOKEN": TOKEN}, timeout=600)
        late: list[int] = []
        for size in sizes:
            started = time.perf_counter()
            while merged < size:
                _merge_one(sim, merged)
                merged += 1
            build_seconds = time.perf_counter() - started
            if not late:
                late = [_open_mr(sim, f"late-{i}") for i in range(OPEN - len(early))]
            one = late[0]

            def list_open() -> None:
                response = client.get(
                    f"/projects/{project_id}/merge_requests",
                    params={"state": "opened", "per_page": OPEN},
                )
                _expect(response.status_code == 200 and len(response.json()) == OPEN)

            def get_one(iid: int = one) -> None:
                _expect(client.get(f"/projects/{project_id}/merge_requests/{iid}").is_success)

            def helper_list() -> None:
                _expect(len(sim.merge_requests(PROJECT, state="opened")) == OPEN)

            next_merge = merged

            def merge_next() -> None:
                nonlocal next_merge
                _merge_one(sim, next_merge)
                next_merge += 1

            profiler = cProfile.Profile() if profile and size == sizes[-1] else None
            if profiler is not None:
                profiler.enable()
            row = {
                "merged": size,
                "list_100_open_http_s": _median(list_open, repeat),
                "get_one_mr_http_s": _median(get_one, repeat),
                "helper_list_open_s": _median(helper_list, repeat),
                "merge_one_s": _median(merge_next, repeat),
                "build_seconds": round(build_seconds, 1),
            }
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(profile or "")
                pstats.Stats(profile or "").sort_stats("cumulative").print_stats(25)
            merged = next_merge
            rows.append(row)
            print(json.dumps(row), flush=True)
        client.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--merges", default="500,2000", help="comma-separated history sizes")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = sorted(int(value) for value in args.merges.split(","))
    rows = measure(sizes, args.repeat, args.profile)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'merged':>7} {'list 100 (HTTP)':>16} {'GET one':>9} {'helper list':>12} {'merge':>8}")
    for row in rows:
        print(
            f"{row['merged']:>7} {row['list_100_open_http_s'] * 1000:>13.1f} ms"
            f" {row['get_one_mr_http_s'] * 1000:>6.1f} ms"
            f" {row['helper_list_open_s'] * 1000:>9.1f} ms {row['merge_one_s'] * 1000:>5.1f} ms"
        )


if __name__ == "__main__":
    main()
