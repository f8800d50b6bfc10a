"""200 webhooks/s for 30 s over 100 items: every delivery stored once, none lost, all converge.

Deliveries are real HTTP POSTs by the simulator (`send_webhook`) to the service
built by `create_app`, running in a child process (its own GIL: the load
generator here does not slow it down). One in twenty re-sends an earlier
delivery (GitLab's retry / "Resend"), which must be answered "duplicate" and
store nothing. Items are not processed, so every stored event stays countable.
The answer latency is printed (p50/p99), not asserted.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from harness import fast_config, running_manager, settled, wait_until
from live_app import free_port
from webhook_support import OLD_SECRET, make_item, mr_registry, resolved

from workqueue.api.webhooks.route import WEBHOOK_PATH
from workqueue.testing.gitlab_simulator import JobSpec

RATE = 200  # deliveries per second
SECONDS = 30
ITEMS = 100
RESEND_EVERY = 20  # every 20th send repeats an earlier delivery
SENDERS = 8  # concurrent connections, like a few GitLab Sidekiq workers
BASELINE = 200  # sent one at a time first


HERE = Path(__file__).resolve().parent
SUPPORT = HERE.parent / "support"


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def service_process(database_url, gitlab_url) -> Iterator[tuple[str, int]]:
    """(receiver URL, pid) of the service served by `serve_webhook_app.py` in a child process."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), str(HERE), *sys.path])}
    child = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "serve_webhook_app.py"),
            database_url.render_as_string(hide_password=False),
            gitlab_url,
            str(port),
        ],
        env=env,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the service process did not start")
            time.sleep(0.1)
        yield base_url + WEBHOOK_PATH, child.pid
    finally:
        child.terminate()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def build_world(simulator, sessions, registry, world):
    """ITEMS bot MRs (each with an MR pipeline and a note) and their items; returns hooks."""
    project = world.project_id
    hooks: list[tuple[uuid.UUID, dict]] = []  # (the item it concerns, payload)
    for n in range(ITEMS):
        branch = f"workqueue/load-{n}"
        sha = simulator.push(project, branch, {f"f{n}.txt": f"{n}\n"}, user="workqueue-bot")
        iid = simulator.create_merge_request(project, branch, f"Load {n}", user="workqueue-bot")
        pipeline = simulator.create_pipeline(
            project, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="running")]
        )
        note = simulator.add_note(project, iid, f"note {n}")
        # Half the items name the project by path, half by numeric id.
        item = make_item(
            sessions,
            registry,
            project=world.project_path if n % 2 else str(project),
            source_branch=branch,
            mr_iid=iid,
            mr_sha=sha,
            head_pipeline_id=pipeline,
        )
        hooks += [
            (item, simulator.merge_request_hook(project, iid)),
            (item, simulator.pipeline_hook(pipeline)),
            (item, simulator.note_hook(note)),
        ]
    return hooks


def delivery_plan(hooks, count, rng, *, resend_every=0):
    """(delivery key, item, payload) per send; every `resend_every`-th repeats a recent one."""
    plan: list[tuple[str, uuid.UUID, dict]] = []
    for index in range(count):
        if resend_every and index % resend_every == resend_every - 1:
            plan.append(plan[rng.randrange(max(1, index - 100))])
        else:
            item, payload = hooks[rng.randrange(len(hooks))]
            plan.append((str(uuid.uuid4()), item, payload))
    return plan


class Sender:
    """Sends deliveries with the simulator, recording answers and answer latencies."""

    def __init__(self, simulator, url):
        self.simulator = simulator
        self.url = url
        self.answers: Counter[tuple[int, str]] = Counter()
        self.lock = threading.Lock()

    def send(self, key, payload, latencies):
        started = time.perf_counter()
        response = self.simulator.send_webhook(
            self.url, payload, secret_token=OLD_SECRET, idempotency_key=key, timeout=30
        )
        elapsed = time.perf_counter() - started
        status = response.json().get("status", "?") if response.status_code == 200 else "-"
        with self.lock:
            latencies.append(elapsed)
            self.answers[response.status_code, status] += 1

    def at_rate(self, plan, rate, senders):
        """Open loop: send i starts at i / rate s; returns latencies and the times taken."""
        latencies: list[float] = []
        with ThreadPoolExecutor(max_workers=senders) as pool:
            begin = time.monotonic()
            for index, (key, _, payload) in enumerate(plan):
                delay = begin + index / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(self.send, key, payload, latencies)
            sent_in = time.monotonic() - begin
        return latencies, sent_in, time.monotonic() - begin


def ms(seconds):
    return f"{seconds * 1000:.1f} ms"


@pytest.mark.slow
def test_200_webhooks_per_second_for_30_seconds_lose_nothing(
    database_url, simulator, sessions, world
):
    registry = mr_registry(simulator.url)
    rng = random.Random(7)  # noqa: S311 - reproducible choices, not cryptography
    with service_process(database_url, simulator.url) as (url, pid):
        hooks = build_world(simulator, sessions, registry, world)
        baseline = delivery_plan(hooks, BASELINE, rng)
        plan = delivery_plan(hooks, RATE * SECONDS, rng, resend_every=RESEND_EVERY)
        sender = Sender(simulator, url)
        unloaded: list[float] = []
        for key, _, payload in baseline:  # one at a time: the latency without load
            sender.send(key, payload, unloaded)
        cpu_before = cpu_seconds(pid)
        latencies, sent_in, finished_in = sender.at_rate(plan, RATE, SENDERS)
        cpu_after = cpu_seconds(pid)
        resolved(sessions)  # the service resolves what it stored before it stops

    print(
        f"\n{BASELINE} webhooks one at a time: p50 {ms(percentile(unloaded, 0.5))}, "
        f"p99 {ms(percentile(unloaded, 0.99))}\n"
        f"{len(plan)} webhooks in {sent_in:.1f} s ({len(plan) / sent_in:.0f}/s offered, "
        f"{SENDERS} connections), all answered after {finished_in:.1f} s; answer latency "
        f"p50 {ms(percentile(latencies, 0.5))}, p99 {ms(percentile(latencies, 0.99))}, "
        f"max {ms(max(latencies))}, mean {ms(statistics.fmean(latencies))}; "
        f"all answers {dict(sender.answers)}"
    )
    if cpu_before is not None and cpu_after is not None:
        print(f"server CPU {ms((cpu_after - cpu_before) / len(plan))} per webhook")

    distinct = {key: item for key, item, _ in baseline + plan}
    assert sender.answers == {
        (200, "accepted"): len(distinct),
        (200, "duplicate"): len(baseline) + len(plan) - len(distinct),
    }
    with sessions() as session:
        stored = session.execute(
            sa.text("SELECT work_item_id, dedupe_key FROM pending_events")
        ).all()
        recorded = session.execute(sa.text("SELECT delivery_key FROM received_deliveries")).all()
    assert sorted(row.delivery_key for row in recorded) == sorted(distinct)
    assert sorted((row.work_item_id, row.dedupe_key) for row in stored) == sorted(
        (item, f"{key}:{item}") for key, item in distinct.items()
    )

    # Every item converges: all events drained, nothing left actionable, none failed.
    with running_manager(sessions, registry, fast_config(workers=6), handled_types=["mr"]):
        wait_until(lambda: settled(sessions), timeout=180, what="every item to converge")
    with sessions() as session:
        phases = dict(
            session.execute(sa.text("SELECT phase, count(*) FROM work_items GROUP BY phase")).all()
        )
    assert phases.get("failed", 0) == 0, phases
    assert sum(phases.values()) == ITEMS
