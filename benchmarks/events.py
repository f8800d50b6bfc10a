"""Webhook → executor start latency, next to PostgreSQL's raw NOTIFY round trip.

The real service (create_app, uvicorn, the `mr` type) runs against the
in-package GitLab simulator. MR items are created through the API; then
pipeline webhooks are POSTed at a fixed rate, spread over the items, and for
each one we measure the time from sending it to the start of the
`reconcile_mr` executor it triggers. In the same run, the round trip of a bare
LISTEN/NOTIFY between two connections gives the floor.

Usage: python benchmarks/events.py [--rates 50,500] [--seconds 10] [--items 100] [--json]
"""

from __future__ import annotations

import argparse
import bisect
import json
import logging
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
from concurrent.futures import ThreadPoolExecutor
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_service(url: URL, gitlab_url: str, workdir: Path) -> tuple[subprocess.Popen[str], str]:
    """The service in its own process (as deployed), JSON logs on stderr."""
    config = workdir / "config.yml"
    config.write_text(
        f"processing:\n  workers: 10\nhandled_types:\n  mr:\n    gitlab_url: {gitlab_url}\n",
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


def run(url: URL, rates: list[int], seconds: float, items: int) -> dict[str, Any]:
    simulator = GitLabSimulator(token=TOKEN).start()
    simulator.create_project(PROJECT, {"version.txt": "0\n"})
    workdir = Path(tempfile.mkdtemp(prefix="workqueue-bench-events-"))
    starts = StartTimes()
    results: dict[str, Any] = {"notify_round_trip": notify_round_trip(url)}
    process, base = start_service(url, simulator.url, workdir)
    follower = threading.Thread(target=starts.follow, args=(process.stderr,), daemon=True)
    follower.start()
    try:
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
        for rate in rates:
            results[f"{rate}_per_s"] = measure(base, ids, hooks, rate, seconds, starts)
    finally:
        process.terminate()
        process.wait(60)
        simulator.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


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
    ids: list[uuid.UUID],
    hooks: list[dict[str, Any]],
    rate: int,
    seconds: float,
    starts: StartTimes,
) -> dict[str, float]:
    sent: list[tuple[uuid.UUID, float]] = []
    answers: list[float] = []
    lock = threading.Lock()
    local = threading.local()

    def post(index: int) -> None:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(base_url=base, timeout=30)
        item = index % len(ids)
        headers = {"X-Gitlab-Token": SECRET, "X-Gitlab-Event-UUID": str(uuid.uuid4())}
        started = time.time()
        client.post("/api/webhooks/gitlab", json=hooks[item], headers=headers)
        with lock:
            sent.append((ids[item], started))
            answers.append((time.time() - started) * 1000)

    total = int(rate * seconds)
    with ThreadPoolExecutor(max_workers=16) as pool:
        begin = time.perf_counter()
        for index in range(total):
            delay = begin + index / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(post, index)
    time.sleep(3.0)  # let the last events be processed
    latencies = []
    for item_id, moment in sent:
        start = starts.first_after(item_id, moment)
        if start is not None:
            latencies.append((start - moment) * 1000)
    achieved = total / max(time.perf_counter() - begin - 3.0, 1e-9)
    return {
        "sent": total,
        "achieved_per_s": round(achieved, 1),
        "answer_p50_ms": round(statistics.median(answers), 2),
        "answer_p99_ms": round(percentile(answers, 0.99), 2),
        "executor_start_p50_ms": round(percentile(latencies, 0.5), 2) if latencies else -1,
        "executor_start_p99_ms": round(percentile(latencies, 0.99), 2) if latencies else -1,
        "matched": len(latencies),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="50,500")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--database-url")
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
        result = run(url, rates, arguments.seconds, arguments.items)
    finally:
        if cluster is not None:
            cluster.stop()
        if cluster_dir is not None:
            shutil.rmtree(cluster_dir, ignore_errors=True)
    print(json.dumps(result) if arguments.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
