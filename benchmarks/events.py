"""Webhook → executor start latency, next to PostgreSQL's raw NOTIFY round trip.

The real service (create_app, uvicorn, the `mr` type) runs against the
in-package GitLab simulator. MR items are created through the API; then
pipeline webhooks are POSTed at a fixed rate, spread over the items, and for
each one we measure the time from sending it to the start of the
`reconcile_mr` executor it triggers. In the same run, the round trip of a bare
LISTEN/NOTIFY between two connections gives the floor.

The load comes from a separate process (`load_generator`): asyncio with
uvloop over raw keep-alive HTTP/1.1 connections, open loop (request n is due at
n / rate; its answer time counts from then, so a server that falls behind
shows the wait too). It costs a fraction of what an HTTP client library would,
which matters on a two-core machine. The service's own CPU per webhook is read
from `/proc`.

Usage: python benchmarks/events.py [--rates 200,1000] [--seconds 10] [--items 100] [--json]
       [--profile DIR] [--workers 10] [--replicas 1]

With `--replicas N`, N service processes share the database (the load and
the profile go to the first; executor starts are read from all of them).

With `--profile DIR`, py-spy (next to this Python) samples the service during
every round and its drain (only the thread holding the GIL) and leaves
`intake_RATE.txt` and `items_RATE.txt` in DIR: py-spy's raw collapsed stacks,
one line per distinct stack with its sample count.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import logging
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy.engine import URL

from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.url import libpq_conninfo, normalize_database_url
from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

PROJECT = "bench/events"
TOKEN = "bench-token"  # noqa: S105 - the simulator's token
SECRET = "bench-webhook-secret"  # noqa: S105 - local benchmark secret


class StartTimes:
    """Executor start times per item, read from the service's JSON audit log.

    An `action_outcome` entry is written when an action ends and carries its
    duration; start = entry time - duration (same host, same clock).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_item: dict[uuid.UUID, list[float]] = defaultdict(list)

    def follow(self, stream: Any) -> None:
        for line in stream:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            message = record.get("message", "")
            if record.get("logger") != "workqueue.audit" or not message.startswith("audit "):
                continue
            entry = json.loads(message[len("audit ") :])
            details = entry.get("details") or {}
            if (
                entry.get("event_type") != "action_outcome"
                or details.get("action") != "reconcile_mr"
            ):
                continue
            ended = datetime.fromisoformat(entry["timestamp"]).timestamp()
            started = ended - float(details.get("duration_seconds") or 0)
            with self.lock:
                bisect.insort(self.by_item[uuid.UUID(entry["work_item_id"])], started)

    def count_between(self, begin: float, end: float) -> int:
        """Executor starts in [begin, end), all items."""
        with self.lock:
            return sum(
                bisect.bisect_left(starts, end) - bisect.bisect_left(starts, begin)
                for starts in self.by_item.values()
            )

    def first_after(self, item_id: uuid.UUID, moment: float) -> float | None:
        with self.lock:
            starts = self.by_item.get(item_id, [])
            index = bisect.bisect_left(starts, moment)
            return starts[index] if index < len(starts) else None


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def notify_round_trip(url: URL, samples: int = 500) -> dict[str, float]:
    conninfo = libpq_conninfo(url)
    times = []
    with (
        psycopg.connect(conninfo, autocommit=True) as listener,
        psycopg.connect(conninfo, autocommit=True) as sender,
    ):
        listener.execute("LISTEN bench_round_trip")
        for _ in range(samples):
            started = time.perf_counter()
            sender.execute("NOTIFY bench_round_trip, 'x'")
            for _notification in listener.notifies(timeout=5, stop_after=1):
                break
            times.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": round(percentile(times, 0.5), 3), "p99_ms": round(percentile(times, 0.99), 3)}


def durable_commits(url: URL, rate: int, seconds: float) -> dict[str, float]:
    """The storage's floor under a webhook answer: one durable commit per delivery.

    A 2 KiB row inserted and committed (fsync and synchronous commit on, as the
    service runs) `rate` times a second for `seconds`, open loop, on one
    connection, with the service idle. The path to an executor start commits
    at least three times in a row (the delivery, its resolution, the claim):
    `three_in_a_row_p99_ms` is the p99 of the sums of consecutive triples.
    """
    conninfo = libpq_conninfo(url)
    times: list[float] = []
    with psycopg.connect(conninfo, autocommit=True) as connection:
        # A regular table: a temporary one writes no WAL, so its commits wait for no flush.
        connection.execute("CREATE TABLE IF NOT EXISTS bench_commit (body text)")
        body = "x" * 2048
        began = time.perf_counter()
        for n in range(max(1, int(rate * seconds))):
            time.sleep(max(0.0, began + n / rate - time.perf_counter()))
            started = time.perf_counter()
            connection.execute("INSERT INTO bench_commit VALUES (%s)", (body,))
            times.append((time.perf_counter() - started) * 1000)
        connection.execute("DROP TABLE bench_commit")
    triples = [sum(times[n : n + 3]) for n in range(len(times) - 2)] or times
    return {
        "p50_ms": round(percentile(times, 0.5), 2),
        "p99_ms": round(percentile(times, 0.99), 2),
        "max_ms": round(max(times), 2),
        "three_in_a_row_p99_ms": round(percentile(triples, 0.99), 2),
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_service(
    url: URL, gitlab_url: str, workdir: Path, workers: int
) -> tuple[subprocess.Popen[str], str]:
    """The service in its own process (as deployed), JSON logs on stderr."""
    config = workdir / "config.yml"
    config.write_text(
        f"processing:\n  workers: {workers}\nhandled_types:\n  mr:\n    gitlab_url: {gitlab_url}\n",
        encoding="utf-8",
    )
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url.render_as_string(hide_password=False),
        "WORKQUEUE_SERVICE_CONFIG": str(config),
        "WORKQUEUE_SERVICE_GITLAB_TOKEN": TOKEN,
        "WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET": SECRET,
        "WORKQUEUE_SERVICE_LOCAL_AUTH_USER": "bench",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "workqueue", "serve", "--port", str(port), "--log-format", "json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the service did not start")


def run(
    url: URL,
    rates: list[int],
    seconds: float,
    items: int,
    connections: int,
    profile: Path | None = None,
    *,
    workers: int = 10,
    replicas: int = 1,
) -> dict[str, Any]:
    simulator = GitLabSimulator(token=TOKEN).start()
    simulator.create_project(PROJECT, {"version.txt": "0\n"})
    workdir = Path(tempfile.mkdtemp(prefix="workqueue-bench-events-"))
    starts = StartTimes()
    results: dict[str, Any] = {"notify_round_trip": notify_round_trip(url)}
    process, base = start_service(url, simulator.url, workdir, workers)
    threading.Thread(target=starts.follow, args=(process.stderr,), daemon=True).start()
    # More replicas share the work through the database; the load goes to the first.
    others = [start_service(url, simulator.url, workdir, workers)[0] for _ in range(replicas - 1)]
    for other in others:
        threading.Thread(target=starts.follow, args=(other.stderr,), daemon=True).start()
    try:
        time.sleep(2.0)  # settled after startup: its idle memory (target P4: ≤ 150 MiB)
        results["rss_idle_mib"] = process_memory_mib(process.pid, "VmRSS")
        with httpx.Client(base_url=base, timeout=30) as client:
            ids = [
                uuid.UUID(client.post("/api/work-items/mr", json=submission(n)).json()["id"])
                for n in range(items)
            ]
            iids = []
            for item_id in ids:
                while client.get(f"/api/work-items/{item_id}").json()["details"]["mr_iid"] is None:
                    time.sleep(0.05)
                iids.append(client.get(f"/api/work-items/{item_id}").json()["details"]["mr_iid"])
        pipelines = [
            simulator.create_pipeline(
                PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit", status="running")]
            )
            for iid in iids
        ]
        hooks = [simulator.pipeline_hook(pipeline) for pipeline in pipelines]
        time.sleep(2.0)  # let the post-creation reconciles finish
        # First the receiver and resolver alone: pipelines of a project no item
        # is in, stored, resolved (one lookup) and found to concern nothing.
        unmatched = [{**hooks[0], "project": {"id": 999_999, "path_with_namespace": "x/y"}}]
        rounds = [
            (f"intake_only_{rate}_per_s", f"intake_{rate}", [], unmatched, rate) for rate in rates
        ]
        rounds += [(f"{rate}_per_s", f"items_{rate}", ids, hooks, rate) for rate in rates]
        for name, profile_name, round_ids, round_hooks, rate in rounds:
            profiler = None
            if profile is not None:
                profiler = start_profiler(process.pid, profile / f"{profile_name}.txt", seconds + 3)
            floor = durable_commits(url, rate, min(seconds, 5.0))
            results[name] = measure(
                base, process.pid, round_ids, round_hooks, rate, seconds, starts, connections
            )
            results[name]["durable_commit"] = floor
            if profiler is not None:
                profiler.wait(60)
    finally:
        for service in [*others, process]:
            service.terminate()
            service.wait(60)
        simulator.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def start_profiler(pid: int, output: Path, seconds: float) -> subprocess.Popen[bytes]:
    """py-spy sampling `pid` for `seconds` (raw collapsed stacks, without pausing it)."""
    py_spy = Path(sys.executable).with_name("py-spy")
    output.parent.mkdir(parents=True, exist_ok=True)
    command = [str(py_spy), "record", "-p", str(pid), "-f", "raw", "-o", str(output)]
    # --gil: only the thread holding the GIL, i.e. where the interpreter's time goes.
    command += ["-d", str(max(1, int(seconds))), "-r", "250", "--gil", "--nonblocking"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def submission(n: int) -> dict[str, Any]:
    return {
        "project": PROJECT,
        "source_branch": f"workqueue/b{n}",
        "title": "t",
        "commit_message": "m",
        "file_actions": [{"action": "update", "file_path": "version.txt", "content": f"{n + 1}\n"}],
    }


def measure(
    base: str,
    service_pid: int,
    ids: list[uuid.UUID],
    hooks: list[dict[str, Any]],
    rate: int,
    seconds: float,
    starts: StartTimes,
    connections: int,
) -> dict[str, float]:
    total = int(rate * seconds)
    begin = time.time()
    cpu_before = process_cpu_seconds(service_pid)
    system_before = process_cpu_seconds(service_pid, system_only=True)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        load = pool.apply(load_generator, (base, hooks, rate, total, connections))
    time.sleep(3.0)  # let the last events be processed
    # Read after the drain: steps that fell behind the load still count.
    cpu_seconds = process_cpu_seconds(service_pid) - cpu_before
    system_seconds = process_cpu_seconds(service_pid, system_only=True) - system_before
    time.sleep(0.5)  # the audit lines of the last steps reach the follower
    steps = starts.count_between(begin, time.time())
    latencies = []
    for index, moment in load["due"] if ids else ():
        start = starts.first_after(ids[index % len(ids)], moment)
        if start is not None:
            latencies.append((start - moment) * 1000)
    answers = load["answers_ms"]
    return {
        "sent": total,
        "accepted": load["accepted"],
        "achieved_per_s": round(load["achieved_per_s"], 1),
        "answer_p50_ms": round(statistics.median(answers), 2),
        "answer_p99_ms": round(percentile(answers, 0.99), 2),
        "executor_start_p50_ms": round(percentile(latencies, 0.5), 2) if latencies else -1,
        "executor_start_p99_ms": round(percentile(latencies, 0.99), 2) if latencies else -1,
        "matched": len(latencies),
        # reconcile_mr runs started in the round and its drain: several webhooks
        # for one item waiting together are applied by one run.
        "reconcile_steps": steps,
        "service_cpu_ms_per_webhook": round(cpu_seconds * 1000 / max(total, 1), 2),
        # Of which in the kernel (system time: sockets, futexes, thread wake-ups).
        "service_system_cpu_ms_per_webhook": round(system_seconds * 1000 / max(total, 1), 2),
        # The service's peak resident memory so far (target P4: ≤ 300 MiB under load).
        "rss_peak_mib": process_memory_mib(service_pid, "VmHWM"),
    }


def process_memory_mib(pid: int, field: str) -> float:
    """A memory figure of a process from /proc/PID/status (VmRSS, VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith(f"{field}:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def process_cpu_seconds(pid: int, *, system_only: bool = False) -> float:
    """User + system CPU of a process so far, or its system CPU alone (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    ticks = int(fields[12]) if system_only else int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def load_generator(
    base: str, hooks: list[dict[str, Any]], rate: int, total: int, connections: int
) -> dict[str, Any]:
    """Run in its own process: POST `total` webhooks at `rate`/s, open loop."""
    try:
        import uvloop  # noqa: PLC0415 - optional speed-up of the generator itself

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    return runner(_load(base, hooks, rate, total, connections))


async def _load(
    base: str, hooks: list[dict[str, Any]], rate: int, total: int, connections: int
) -> dict[str, Any]:
    host, port = base.removeprefix("http://").split(":")
    bodies = [json.dumps(hook).encode() for hook in hooks]
    head = (
        f"POST /api/webhooks/gitlab HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nX-Gitlab-Token: {SECRET}\r\n"
        "X-Gitlab-Event: Pipeline Hook\r\n"
    )
    due_queue: asyncio.Queue[tuple[int, float]] = asyncio.Queue()
    answers: list[float] = []
    due: list[tuple[int, float]] = []
    accepted = 0
    clock_offset = time.time() - time.perf_counter()

    async def connection() -> None:
        nonlocal accepted
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while True:
                index, moment = await due_queue.get()
                if index < 0:
                    return
                body = bodies[index % len(bodies)]
                request = (
                    f"{head}X-Gitlab-Event-UUID: {uuid.uuid4()}\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n"
                ).encode() + body
                writer.write(request)
                status_line = await reader.readline()
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                answer = await reader.readexactly(length)
                answers.append((time.perf_counter() - moment) * 1000)
                due.append((index, moment + clock_offset))
                if b" 200 " in status_line and b"accepted" in answer:
                    accepted += 1
        finally:
            writer.close()

    workers = [asyncio.create_task(connection()) for _ in range(connections)]
    begin = time.perf_counter()
    for index in range(total):
        moment = begin + index / rate
        delay = moment - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        due_queue.put_nowait((index, moment))
    for _ in workers:
        due_queue.put_nowait((-1, 0.0))
    await asyncio.gather(*workers)
    elapsed = time.perf_counter() - begin
    return {
        "answers_ms": answers,
        "due": due,
        "accepted": accepted,
        "achieved_per_s": len(answers) / elapsed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="200,1000")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--database-url")
    parser.add_argument("--profile", type=Path, help="py-spy the service in every round")
    parser.add_argument("--workers", type=int, default=10, help="processing.workers")
    parser.add_argument(
        "--replicas", type=int, default=1, help="service processes sharing the database"
    )
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    rates = [int(rate) for rate in arguments.rates.split(",")]
    cluster_dir: Path | None = None
    cluster: EmbeddedPostgres | None = None
    if arguments.database_url:
        url = normalize_database_url(arguments.database_url)
    else:
        cluster_dir = Path(tempfile.mkdtemp(prefix="workqueue-bench-"))
        cluster = EmbeddedPostgres(cluster_dir)
        url = cluster.start()
    try:
        result = run(
            url,
            rates,
            arguments.seconds,
            arguments.items,
            arguments.connections,
            arguments.profile,
            workers=arguments.workers,
            replicas=arguments.replicas,
        )
    finally:
        if cluster is not None:
            cluster.stop()
        if cluster_dir is not None:
            shutil.rmtree(cluster_dir, ignore_errors=True)
    print(json.dumps(result) if arguments.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
