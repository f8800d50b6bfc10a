"""Soak: a steady mixed load against one `serve` process, sampled every 10 s for drift.

The service runs in its own process against an embedded PostgreSQL and the
in-package GitLab simulator. For `--minutes` the driver keeps up, at fixed
rates:

* submissions: new MR items (each its own branch and file, so none conflict);
* webhooks: once an item has its MR, a successful pipeline is created in the
  simulator and its Pipeline Hook delivered (plus a redelivery of the same
  UUID, which must be a no-op); the service then merges and completes the
  item; after completion a late Merge Request Hook is sent for it too;
* reads: MR and generic lists (first and second pages) and item GETs.

Every 10 s it samples the service's RSS and thread count (`/proc`), its open
database connections (`pg_stat_activity`), the queue depth (active and
actionable items) and the p99 latency of each request kind in that interval.
At the end it fits a least-squares slope (per hour) to each series over the
samples after the first fifth (warm-up) and prints one line per figure and
one verdict line, `soak: PASS|FAIL ...`: a series fails when its fitted
growth over the run exceeds its tolerance, or when an item was lost.

Usage: python benchmarks/soak.py --minutes 30 [--rate 1.0] [--json] [--progress]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy.engine import URL

from service_process import (
    WEBHOOK_SECRET,
    ServiceProcess,
    percentile,
    start_service,
    write_config,
)
from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.url import libpq_conninfo, normalize_database_url
from workqueue.testing.gitlab_simulator import GitLabSimulator

PROJECT = "soak/app"
SAMPLE_SECONDS = 10.0
REQUEST_KINDS = ("submit", "webhook", "list", "get")
# Allowed fitted growth over the measured window: (absolute, fraction of the mean);
# the larger of the two applies.
TOLERANCES: dict[str, tuple[float, float]] = {
    "rss_mib": (16.0, 0.10),
    "connections": (2.0, 0.0),
    "threads": (2.0, 0.0),
    "active_items": (10.0, 0.5),
    "actionable_items": (10.0, 0.5),
    **{f"{kind}_p99_ms": (50.0, 1.0) for kind in REQUEST_KINDS},
}


@dataclass
class Latencies:
    """Request latencies (ms) per kind since the last sample."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    current: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def record(self, kind: str, started: float, response: httpx.Response) -> None:
        elapsed = (time.perf_counter() - started) * 1000
        with self.lock:
            self.current[kind].append(elapsed)
            if response.status_code >= 500:
                self.errors[kind] += 1

    def take(self) -> dict[str, list[float]]:
        with self.lock:
            taken, self.current = self.current, defaultdict(list)
        return taken


@dataclass
class Items:
    """Items in flight, by what the driver waits for next."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    awaiting_mr: dict[uuid.UUID, tuple[float, str]] = field(default_factory=dict)  # since, branch
    awaiting_merge: dict[uuid.UUID, tuple[float, int]] = field(default_factory=dict)  # since, iid
    known: list[uuid.UUID] = field(default_factory=list)
    submitted: int = 0
    completed: int = 0
    failed: int = 0
    rejected: int = 0  # submissions answered with an error
    driver_errors: int = 0  # exceptions in the load threads (connection errors, ...)
    turnaround: list[float] = field(default_factory=list)


class Load:
    def __init__(self, service: ServiceProcess, simulator: GitLabSimulator, rate: float) -> None:
        self.service = service
        self.simulator = simulator
        self.rate = rate
        self.latencies = Latencies()
        self.items = Items()
        self.stopping = threading.Event()
        self.submitting = threading.Event()
        self.submitting.set()
        self.next_submission = 0

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.service.base_url, timeout=30)

    def resilient(self, loop: Callable[[], None]) -> Callable[[], None]:
        """Run `loop` again after an error (counted, first one printed) until stopped."""

        def run() -> None:
            while not self.stopping.is_set():
                try:
                    loop()
                except Exception:
                    with self.items.lock:
                        self.items.driver_errors += 1
                        first = self.items.driver_errors == 1
                    if first:
                        traceback.print_exc()
                    time.sleep(1.0)
                else:
                    return

        return run

    def submit_loop(self) -> None:
        with self.client() as client:
            first = self.next_submission
            begin = time.perf_counter()
            while self.submitting.is_set() and not self.stopping.is_set():
                n = self.next_submission
                delay = begin + (n - first) / self.rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                self.next_submission += 1  # a restarted loop goes on with new branches
                started = time.perf_counter()
                response = client.post("/api/work-items/mr", json=submission(n))
                self.latencies.record("submit", started, response)
                if response.status_code not in (200, 201):
                    with self.items.lock:
                        self.items.rejected += 1
                else:
                    item_id = uuid.UUID(response.json()["id"])
                    with self.items.lock:
                        self.items.awaiting_mr[item_id] = (time.time(), branch_of(n))
                        self.items.known.append(item_id)
                        self.items.submitted += 1

    def drive_loop(self) -> None:
        """Move each item on: MR opened → green pipeline + hook; completed → late hook.

        What GitLab holds is read from the simulator in this process, and an
        item is fetched from the service only once its MR is merged: the
        driver's own cost per item stays constant, so a backlog it built
        itself cannot pass for the service's.
        """
        with self.client() as client:
            while not self.stopping.is_set():
                with self.items.lock:
                    waiting_mr = list(self.items.awaiting_mr.items())
                    waiting_merge = list(self.items.awaiting_merge.items())
                for item_id, (since, branch) in waiting_mr:
                    opened = self.simulator.merge_requests(
                        PROJECT, state="opened", source_branch=branch
                    )
                    if not opened:
                        continue
                    iid = int(opened[0]["iid"])
                    pipeline = self.simulator.create_pipeline(
                        PROJECT, merge_request_iid=iid, status="success"
                    )
                    hook = self.simulator.pipeline_hook(pipeline)
                    delivery = str(uuid.uuid4())
                    self.deliver(client, hook, delivery)
                    self.deliver(client, hook, delivery)  # a redelivery: no effect
                    with self.items.lock:
                        del self.items.awaiting_mr[item_id]
                        self.items.awaiting_merge[item_id] = (since, iid)
                for item_id, (since, iid) in waiting_merge:
                    if self.simulator.merge_request(PROJECT, iid)["state"] != "merged":
                        continue
                    body = self.get(client, item_id)
                    if body is None or body["phase"] == "active":
                        continue
                    late = self.simulator.merge_request_hook(PROJECT, iid, action="merge")
                    self.deliver(client, late, str(uuid.uuid4()))
                    with self.items.lock:
                        del self.items.awaiting_merge[item_id]
                        if body["phase"] == "completed":
                            self.items.completed += 1
                            self.items.turnaround.append(time.time() - since)
                        else:
                            self.items.failed += 1
                time.sleep(0.2)

    def read_loop(self) -> None:
        """Lists (first and second page) and item GETs, about four requests a second."""
        chooser = random.Random(12)
        with self.client() as client:
            while not self.stopping.is_set():
                path = chooser.choice(
                    ["/api/work-items/mr?phase=active", "/api/work-items/mr", "/api/work-items"]
                )
                started = time.perf_counter()
                response = client.get(path, params={"limit": 50})
                self.latencies.record("list", started, response)
                cursor = response.json().get("next_cursor") if response.is_success else None
                if cursor:
                    started = time.perf_counter()
                    response = client.get(path, params={"limit": 50, "cursor": cursor})
                    self.latencies.record("list", started, response)
                with self.items.lock:
                    known = list(self.items.known[-500:])
                for item_id in chooser.sample(known, min(2, len(known))):
                    self.get(client, item_id)
                time.sleep(0.5)

    def get(self, client: httpx.Client, item_id: uuid.UUID) -> dict[str, Any] | None:
        started = time.perf_counter()
        response = client.get(f"/api/work-items/{item_id}")
        self.latencies.record("get", started, response)
        return response.json() if response.status_code == 200 else None

    def deliver(self, client: httpx.Client, hook: dict[str, Any], delivery: str) -> None:
        headers = {
            "X-Gitlab-Token": WEBHOOK_SECRET,
            "X-Gitlab-Event": hook_event(hook),
            "X-Gitlab-Event-UUID": delivery,
        }
        started = time.perf_counter()
        response = client.post("/api/webhooks/gitlab", json=hook, headers=headers)
        self.latencies.record("webhook", started, response)


def hook_event(hook: dict[str, Any]) -> str:
    kinds = {"pipeline": "Pipeline Hook", "merge_request": "Merge Request Hook"}
    return kinds[str(hook["object_kind"])]


def branch_of(n: int) -> str:
    return f"workqueue/soak-{n}"


def submission(n: int) -> dict[str, Any]:
    return {
        "project": PROJECT,
        "source_branch": branch_of(n),
        "title": f"soak item {n}",
        "commit_message": f"Add item {n}",
        "file_actions": [{"action": "create", "file_path": f"items/{n}.txt", "content": f"{n}\n"}],
    }


def sample(load: Load, probe: psycopg.Connection[Any], begin: float) -> dict[str, float]:
    row = probe.execute(
        "SELECT (SELECT count(*) FROM pg_stat_activity"
        "        WHERE datname = current_database() AND pid <> pg_backend_pid()),"
        " count(*) FILTER (WHERE phase = 'active'), count(*) FILTER (WHERE actionable)"
        " FROM work_items"
    ).fetchone()
    if row is None:
        raise RuntimeError("the sampling query returned no row")
    point: dict[str, float] = {
        "minute": round((time.perf_counter() - begin) / 60, 2),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "rss_mib": round(load.service.rss_mib(), 1),
        "threads": load.service.threads(),
        "connections": row[0],
        "active_items": row[1],
        "actionable_items": row[2],
    }
    taken = load.latencies.take()
    for kind in REQUEST_KINDS:
        point[f"{kind}_p99_ms"] = round(percentile(taken.get(kind, []), 0.99), 1)
        point[f"{kind}_count"] = len(taken.get(kind, []))
    return point


def slope_per_hour(points: list[dict[str, float]], name: str) -> float:
    pairs = [(p["minute"] / 60, p[name]) for p in points if p[name] == p[name]]  # drop NaN
    if len(pairs) < 2:
        return 0.0
    mean_t = sum(t for t, _ in pairs) / len(pairs)
    mean_v = sum(v for _, v in pairs) / len(pairs)
    spread = sum((t - mean_t) ** 2 for t, _ in pairs)
    if spread == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in pairs) / spread


def verdict(points: list[dict[str, float]], load: Load) -> dict[str, Any]:
    items = load.items
    counts = {
        "submitted": items.submitted,
        "completed": items.completed,
        "failed": items.failed,
        "not_finished": items.submitted - items.completed - items.failed,
        "rejected": items.rejected,
        "driver_errors": items.driver_errors,
        "turnaround_p50_s": round(percentile(items.turnaround, 0.5), 2),
        "turnaround_p99_s": round(percentile(items.turnaround, 0.99), 2),
    }
    return judge(points, counts, dict(load.latencies.errors))


def judge(
    points: list[dict[str, float]], items: dict[str, Any], server_errors: dict[str, int]
) -> dict[str, Any]:
    """Figures and failures from the samples (after the warm-up fifth) and the item counts.

    A series counts as growing when its fitted growth over the run exceeds
    its tolerance *and* it is still setting new highs in the last quarter: a
    leak keeps climbing, while a step (the pool opening connections when the
    machine got busier) levels off.
    """
    measured = points[len(points) // 5 :] or points
    hours = (measured[-1]["minute"] - measured[0]["minute"]) / 60 if len(measured) > 1 else 0.0
    figures: dict[str, Any] = {}
    failures: list[str] = []
    for name, (absolute, fraction) in TOLERANCES.items():
        values = [p[name] for p in measured if p[name] == p[name]]  # NaN: no request
        mean = sum(values) / len(values) if values else 0.0
        slope = slope_per_hour(measured, name)
        growth = slope * hours
        allowed = max(absolute, fraction * mean)
        quarter = max(1, len(values) // 4)
        new_highs = bool(values[:-quarter]) and max(values[-quarter:]) > max(values[:-quarter])
        figures[name] = {
            "mean": round(mean, 2),
            "min": min(values, default=0.0),
            "max": max(values, default=0.0),
            "slope_per_hour": round(slope, 2),
            "growth_over_run": round(growth, 2),
            "allowed_growth": round(allowed, 2),
            "new_high_in_last_quarter": new_highs,
        }
        if growth > allowed and new_highs:
            failures.append(name)
    figures["items"] = items
    figures["server_errors"] = server_errors
    lost = items["not_finished"] or items["failed"] or items["rejected"]
    if lost or items["driver_errors"] or not items["submitted"]:
        failures.append("items")
    if server_errors:
        failures.append("server_errors")
    figures["failures"] = failures
    figures["measured_minutes"] = round(hours * 60, 1)
    return figures


def run(url: URL, minutes: float, rate: float, progress: bool) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="workqueue-soak-"))
    simulator = GitLabSimulator(token="bench-token").start()  # noqa: S106 - simulator token
    simulator.create_project(PROJECT, {"README.md": "soak\n"})
    service = start_service(url, write_config(workdir, simulator.url), workdir / "service.log")
    load = Load(service, simulator, rate)
    threads = [
        threading.Thread(target=load.resilient(target), daemon=True)
        for target in (load.submit_loop, load.drive_loop, load.read_loop)
    ]
    points: list[dict[str, float]] = []
    try:
        with psycopg.connect(libpq_conninfo(url), autocommit=True) as probe:
            begin = time.perf_counter()
            for thread in threads:
                thread.start()
            end = begin + minutes * 60
            while time.perf_counter() < end:
                time.sleep(max(0.0, min(SAMPLE_SECONDS, end - time.perf_counter())))
                points.append(sample(load, probe, begin))
                if progress:
                    print(json.dumps(points[-1]), file=sys.stderr, flush=True)
            load.submitting.clear()
            threads[0].join(60)  # the submitter: its last item is counted before the drain
            drain_until = time.perf_counter() + 120
            while time.perf_counter() < drain_until:
                with load.items.lock:
                    if not load.items.awaiting_mr and not load.items.awaiting_merge:
                        break
                time.sleep(0.5)
            load.stopping.set()
            for thread in threads[1:]:
                thread.join(60)
    finally:
        service.stop()
        simulator.stop()
    result = verdict(points, load)
    result["startup_seconds"] = round(service.startup_seconds, 2)
    result["samples"] = points
    shutil.rmtree(workdir, ignore_errors=True)
    return result


def summary_line(result: dict[str, Any]) -> str:
    status = "FAIL" if result["failures"] else "PASS"
    parts = [f"soak: {status}", f"minutes={result['measured_minutes']}"]
    parts += [f"{name}_slope_per_h={result[name]['slope_per_hour']}" for name in TOLERANCES]
    items = result["items"]
    parts.append(f"submitted={items['submitted']} completed={items['completed']}")
    parts.append(f"lost={items['not_finished']} failed={items['failed']}")
    if result["failures"]:
        parts.append("growing=" + ",".join(result["failures"]))
    return " ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1.0, help="submissions per second")
    parser.add_argument("--json", action="store_true", help="the whole result, samples included")
    parser.add_argument("--progress", action="store_true", help="print each sample to stderr")
    parser.add_argument("--database-url", help="use this database instead of an embedded one")
    parser.add_argument(
        "--rejudge", type=Path, help="judge the samples of an earlier --json result again"
    )
    arguments = parser.parse_args()
    if arguments.rejudge:
        earlier = json.loads(arguments.rejudge.read_text(encoding="utf-8").splitlines()[0])
        result = judge(earlier["samples"], earlier["items"], earlier["server_errors"])
        result["startup_seconds"] = earlier["startup_seconds"]
        result["samples"] = earlier["samples"]
        return report(result, as_json=arguments.json)
    if arguments.minutes <= 0 or arguments.rate <= 0:
        parser.error("--minutes and --rate must be positive")
    logging.basicConfig(level=logging.ERROR)
    cluster_dir: Path | None = None
    cluster: EmbeddedPostgres | None = None
    if arguments.database_url:
        url = normalize_database_url(arguments.database_url)
    else:
        cluster_dir = Path(tempfile.mkdtemp(prefix="workqueue-soak-db-"))
        cluster = EmbeddedPostgres(cluster_dir)
        url = cluster.start()
    try:
        result = run(url, arguments.minutes, arguments.rate, arguments.progress)
    finally:
        if cluster is not None:
            cluster.stop()
        if cluster_dir is not None:
            shutil.rmtree(cluster_dir, ignore_errors=True)
    return report(result, as_json=arguments.json)


def report(result: dict[str, Any], *, as_json: bool) -> int:
    if as_json:
        print(json.dumps(result))
    else:
        for name in TOLERANCES:
            print(f"{name}: {json.dumps(result[name])}")
        print(f"items: {json.dumps(result['items'])}")
        print(f"startup_seconds: {result['startup_seconds']}")
    print(summary_line(result))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
