"""Two real service processes (HTTP, webhooks, processing each) on one database and one
trunk queue (max_concurrent 1): pushes land in rounds, every Push Hook and Pipeline
Hook goes to both processes at once and once more as a new delivery, in random order
(a fixed seed), and builds end green or red at random. Throughout, `in_flight` equals
the heads in `processing` and never exceeds the cap; at the end every head is
succeeded, superseded or failed, nothing is in flight, each admitted head has exactly
one pipeline, and last green never moved backwards (as sampled, and as the bases
pinned by the admissions in the audit history show)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from harness import settled, wait_until
from live_app import free_port
from trunk_harness import (
    PROJECT,
    QUEUE,
    SECRET,
    WEBHOOK,
    finish_pipeline,
    heads,
    land,
    push_hook,
    queue_row,
)

pytestmark = pytest.mark.slow  # starts service processes

SUPPORT = Path(__file__).resolve().parents[2] / "support"
SEED = 20240611
ROUNDS = 8  # each lands 1-3 commits
PROCESSES = 2


@contextmanager
def service_process(database_url: Any, gitlab_url: str) -> Iterator[str]:
    """The webhook URL of a whole service (`serve_trunk_app.py`) in a child process."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path])}
    child = subprocess.Popen(
        [
            sys.executable,
            str(SUPPORT / "serve_trunk_app.py"),
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
                if httpx.get(f"{base_url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the service process did not start")
            time.sleep(0.1)
        yield base_url + WEBHOOK
    finally:
        child.terminate()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


class Deliverer:
    """Sends each hook to every process at once (one delivery, the same key) and once
    more to a random one as a new delivery (GitLab's "Resend"), batches shuffled."""

    def __init__(self, simulator, receivers: list[str], rng: random.Random) -> None:
        self._simulator = simulator
        self._receivers = receivers
        self._rng = rng
        self._pool = ThreadPoolExecutor(max_workers=4)
        self.answers: list[str] = []

    def send(self, payloads: list[dict[str, Any]]) -> None:
        deliveries: list[tuple[str, str, dict[str, Any]]] = []
        for payload in payloads:
            key = str(uuid.uuid4())
            deliveries += [(receiver, key, payload) for receiver in self._receivers]
            deliveries.append((self._rng.choice(self._receivers), str(uuid.uuid4()), payload))
        self._rng.shuffle(deliveries)
        for answer in self._pool.map(lambda delivery: self._post(*delivery), deliveries):
            self.answers.append(answer)

    def _post(self, url: str, key: str, payload: dict[str, Any]) -> str:
        answer = self._simulator.send_webhook(
            url, payload, secret_token=SECRET, idempotency_key=key, timeout=30
        )
        assert answer.status_code == 200, answer.text
        status: str = answer.json()["status"]
        return status

    def close(self) -> None:
        self._pool.shutdown()


def sample(sessions) -> tuple[int, int, int | None]:
    """(in_flight, heads processing, last green sequence), from one snapshot."""
    with sessions() as session:
        row = session.execute(
            sa.text(
                "SELECT q.in_flight, q.last_green_sequence, "
                "  (SELECT count(*) FROM trunk_details AS d "
                "   WHERE d.queue = q.name AND d.state = 'processing') AS processing "
                "FROM trunk_queues AS q WHERE q.name = :name"
            ),
            {"name": QUEUE},
        ).one_or_none()
    if row is None:
        return (0, 0, None)
    return (int(row.in_flight), int(row.processing), row.last_green_sequence)


def admitted_bases(sessions) -> list[str | None]:
    """The base each admission pinned (the last green of then), in admission order."""
    with sessions() as session:
        rows = session.execute(
            sa.text(
                "SELECT details ->> 'base_sha' AS base FROM audit_entries "
                "WHERE event_type = 'trunk_admitted' ORDER BY id"
            )
        ).all()
    return [row.base for row in rows]


class Background:
    """The watcher (samples the queue row) and the CI (finishes each new pipeline green
    or red, sometimes sending a hook of the running pipeline first), in threads."""

    def __init__(self, sessions, simulator, ci: Deliverer, rng: random.Random) -> None:
        self.samples: list[tuple[int, int, int | None]] = []
        self.problems: list[BaseException] = []
        self._sessions, self._simulator, self._ci, self._rng = sessions, simulator, ci, rng
        self._finished: set[int] = set()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._guarded, args=(self._watch,), daemon=True),
            threading.Thread(target=self._guarded, args=(self._play_ci,), daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _guarded(self, body) -> None:
        try:
            while not self._stop.is_set():
                body()
        except BaseException as error:
            self.problems.append(error)
            raise

    def _watch(self) -> None:
        self.samples.append(sample(self._sessions))
        self._stop.wait(0.02)

    def _play_ci(self) -> None:
        hooks = []
        for pipeline in self._simulator.pipeline_ids(PROJECT, source="api"):
            if pipeline in self._finished:
                continue
            if self._rng.random() >= 0.3:  # else only a hook of the running pipeline
                self._finished.add(pipeline)
                status = self._rng.choice(["success", "success", "failed"])
                finish_pipeline(self._simulator, pipeline, status)
            hooks.append(self._simulator.pipeline_hook(pipeline))
        if hooks:
            self._ci.send(hooks)
        self._stop.wait(0.05)


def test_two_service_processes_with_shuffled_duplicated_hooks(database_url, sessions, simulator):
    started = time.monotonic()
    push_rng = random.Random(SEED)  # noqa: S311 - reproducible, not a secret
    ci_rng = random.Random(SEED + 1)  # noqa: S311 - reproducible, not a secret
    shas: list[str] = []
    with ExitStack() as stack:
        receivers = [
            stack.enter_context(service_process(database_url, simulator.url))
            for _ in range(PROCESSES)
        ]
        pushes = Deliverer(simulator, receivers, push_rng)
        ci = Deliverer(simulator, receivers, ci_rng)
        stack.callback(pushes.close)
        stack.callback(ci.close)
        background = Background(sessions, simulator, ci, ci_rng)
        background.start()
        stack.callback(background.stop)

        for _ in range(ROUNDS):
            landed = [land(simulator) for _ in range(push_rng.randint(1, 3))]
            shas += landed
            pushes.send([push_hook(simulator, sha) for sha in landed])
            time.sleep(push_rng.uniform(0.0, 0.6))
        wait_until(
            lambda: (
                shas[-1] in heads(sessions)
                and all(h.phase != "active" for h in heads(sessions).values())
            ),
            timeout=45,
            what="every head ended",
        )
        wait_until(lambda: settled(sessions), timeout=10, what="settled")
        background.stop()
    assert background.problems == []
    assert "accepted" in pushes.answers
    assert "duplicate" in pushes.answers  # the copy sent to the other process
    assert "accepted" in ci.answers
    assert_converged(sessions, simulator, shas, background.samples)
    assert time.monotonic() - started < 60


def assert_converged(sessions, simulator, shas: list[str], samples) -> None:
    final = heads(sessions)
    # A hook is a hint: the head read when it is resolved is ingested, so heads that
    # landed together (or before earlier hooks were resolved) coalesce at ingest.
    assert {h.sha for h in final.values()} <= set(shas)
    assert shas[-1] in final
    assert {h.state for h in final.values()} <= {"succeeded", "superseded", "failed"}
    assert sample(sessions)[:2] == (0, 0)
    # At every moment observed: the counter is the truth, and the cap held.
    assert samples, "the watcher saw nothing"
    assert all(in_flight == processing <= 1 for in_flight, processing, _ in samples)
    greens_seen = [green for _, _, green in samples if green is not None]
    assert greens_seen == sorted(greens_seen)  # last green never moved backwards
    greens = [h for h in final.values() if h.state == "succeeded"]
    if greens:
        newest_green = max(greens, key=lambda h: h.sequence)
        assert queue_row(sessions).last_green_sha == newest_green.sha
    # The audit history agrees: each admission's base is no older than the one before.
    sequence_of = {h.sha: h.sequence for h in final.values()}
    bases = admitted_bases(sessions)
    pinned = [sequence_of[base] for base in bases if base is not None]
    assert pinned == sorted(pinned)
    # Exactly one pipeline per admitted head.
    admitted = sorted(h.pipeline_id for h in final.values() if h.pipeline_id is not None)
    assert admitted == simulator.pipeline_ids(PROJECT, source="api")
    assert len(admitted) == len(bases)
