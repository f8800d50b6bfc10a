"""Scenario 3 (full size only): a GitLab storm. For STORM_SECONDS the simulator answers
half of all calls 502, 503 or 429 (the last two with `Retry-After`), then recovers.
Three replicas run MR items at the engine's default retry settings (max_attempts 5,
backoff from 1 s); the CI fails each first pipeline's job for an infrastructure reason,
so the CI-retry herder retries it, under a small circuit breaker.

Checks and figures: no item fails permanently because of the transient errors; no call
about an item comes sooner than the `Retry-After` of an answer about it; the maximum
number of calls per item; whether the breaker tripped and closed again (sampled from
each replica's /metrics).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass

import httpx
import psycopg
import pytest
from invariants import (
    Verdict,
    calls_per_branch,
    check_gitlab_writes,
    check_items,
    item_branch,
    stuck_items,
    wait_quiescent,
)
from replicas import Replica, replicas, service_config
from workload import PROJECT, CIRunner, Sender, submission, terminal_count, wait_for

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec, RequestRecord

pytestmark = [pytest.mark.chaos, pytest.mark.chaos_full_only, pytest.mark.slow]

REPLICAS = 3
ITEMS = 30
STORM_SECONDS = 60
RETRY_AFTER = 2
BREAKER = {"max_retries": 5, "window_seconds": 15}
# Drawn in order: 502 for 1/6 of the calls, 503 for 1/6, 429 for 1/6 (half in all).
STORM = [
    (502, 1 / 6, {}),
    (503, 0.2, {"Retry-After": str(RETRY_AFTER)}),
    (429, 0.25, {"Retry-After": str(RETRY_AFTER)}),
]


class FlakyCI(CIRunner):
    """Each new MR head gets a pipeline whose job fails (runner_system_failure); a job
    the herder retried is run green. Every change is told by a Pipeline Hook."""

    interval = 0.2

    def __init__(self, simulator: GitLabSimulator, sender: Sender) -> None:
        super().__init__(simulator, sender, "flaky-ci")
        self._pipelines: list[int] = []

    def tick(self) -> None:
        for head in self.new_heads():
            failing = JobSpec("unit-tests", status="failed", failure_reason="runner_system_failure")
            pipeline = self.simulator.create_pipeline(
                PROJECT, merge_request_iid=head.iid, jobs=[failing]
            )
            self._pipelines.append(pipeline)
            self.pipeline_hook(pipeline)
        # Every pipeline stays watched: a herder retry repeated after a lost answer can
        # add a pending job to a pipeline that is green already (30 items: cheap).
        for pipeline in self._pipelines:
            for job in self.simulator.jobs(pipeline):
                if job["status"] in {"pending", "created"}:
                    self.simulator.set_job_status(job["id"], "success")
                    self.pipeline_hook(pipeline)


class BreakerWatch:
    """Samples each replica's `workqueue_ci_retry_breaker_open` gauge."""

    def __init__(self, group: list[Replica]) -> None:
        self.group = group
        self.samples: dict[str, list[float]] = defaultdict(list)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            for replica in self.group:
                try:
                    values = replica.metric("workqueue_ci_retry_breaker_open")
                except httpx.HTTPError:
                    continue
                self.samples[replica.name].append(max(values.values(), default=0.0))
            self._stop.wait(0.5)

    def tripped_and_reset(self) -> tuple[int, int]:
        tripped = reset = 0
        for values in self.samples.values():
            opened = [index for index, value in enumerate(values) if value >= 1]
            if opened:
                tripped += 1
                reset += any(value < 1 for value in values[opened[0] :])
        return tripped, reset


@dataclass(frozen=True)
class Violation:
    """A call about an item that started before the `Retry-After` of an earlier answer
    about the same item had run out."""

    branch: str
    told: RequestRecord  # the 429/503 answer that said how long to wait
    call: RequestRecord  # the call that came too soon

    def describe(self, origin: float) -> str:
        def entry(record: RequestRecord) -> str:
            started = record.started_at if record.started_at is not None else record.at
            return (
                f"{record.method} {record.path} -> {record.status}"
                f" [started {started - origin:.3f} s, answered {record.at - origin:.3f} s,"
                f" caller {record.caller}]"
            )

        assert self.call.started_at is not None
        early = self.told.at + RETRY_AFTER - self.call.started_at
        # A call sent before that answer was given could not have known of it.
        sent = " (sent before that answer)" if self.call.started_at < self.told.at else ""
        return (
            f"{self.branch}: {entry(self.call)} came {early:.3f} s before the Retry-After"
            f" ({RETRY_AFTER} s) of {entry(self.told)}{sent}"
        )


def retry_after_violations(simulator: GitLabSimulator) -> list[Violation]:
    """Calls about an item started sooner than a Retry-After answered about it allowed."""
    branches = {mr["iid"]: mr["source_branch"] for mr in simulator.merge_requests(PROJECT)}
    calls: dict[str, list[tuple[float, float, RequestRecord]]] = defaultdict(list)
    for record in simulator.log.records():
        branch = item_branch(record, branches)
        if branch is not None and record.started_at is not None:
            calls[branch].append((record.started_at, record.at, record))
    violations = []
    for branch, sequence in calls.items():
        told: RequestRecord | None = None  # the answer whose Retry-After ends last so far
        for started, _, record in sorted(sequence, key=lambda call: call[:2]):
            if told is not None and started < told.at + RETRY_AFTER:
                violations.append(Violation(branch, told, record))
            said_wait = record.fault and record.status in {429, 503}
            if said_wait and (told is None or record.at > told.at):
                told = record
    return violations


def describe_violations(simulator: GitLabSimulator, violations: list[Violation]) -> str:
    """The offending pairs of calls, with times relative to the first logged call."""
    records = simulator.log.records()
    origin = min((r.started_at or r.at for r in records), default=0.0)
    shown = "; ".join(violation.describe(origin) for violation in violations[:5])
    more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
    return f"{len(violations)} calls sooner than Retry-After allowed: {shown}{more}"


def test_gitlab_storm(chaos_db, conninfo, simulator, rng, report):
    verdict = Verdict()
    config = service_config(simulator.url, ci_retry={"circuit_breaker": BREAKER})
    config["processing"].update(max_attempts=5, backoff_initial_seconds=1, backoff_max_seconds=300)
    with replicas(REPLICAS, chaos_db.direct_url, config, simulator) as group:
        sender = Sender(group, rng)
        ci, watch = FlakyCI(simulator, sender), BreakerWatch(group)
        ci.start()
        watch.start()
        try:
            rules = [
                simulator.inject_fault(
                    "*", "*", status=status, times=None, probability=p, headers=h
                )
                for status, p, h in STORM
            ]
            ids = [sender.submit(submission(i, "storm-")) for i in range(ITEMS)]
            time.sleep(STORM_SECONDS)
            simulator.faults.clear()
            faulted = sum(rule.hits for rule in rules)
            wait_for(
                lambda: terminal_count(conninfo) == ITEMS,
                timeout=300,
                explain=lambda: stuck_items(conninfo),
            )
            wait_quiescent(conninfo)
        finally:
            watch.stop()
            ci.stop()
            sender.close()
    with psycopg.connect(conninfo) as connection:
        phases = dict(
            connection.execute("SELECT phase, count(*) FROM work_items GROUP BY 1").fetchall()
        )
        errors = [
            row[0]
            for row in connection.execute(
                "SELECT left(error, 100) FROM work_items WHERE phase = 'failed' LIMIT 3"
            ).fetchall()
        ]
    failed = int(phases.get("failed", 0))
    verdict.check(failed == 0, f"{failed} items failed permanently on transient errors: {errors}")
    violations = retry_after_violations(simulator)
    verdict.check(not violations, describe_violations(simulator, violations))
    check_items(conninfo, ids, "completed", verdict)
    check_gitlab_writes(simulator, PROJECT, verdict)
    verdict.check(not ci.problems, f"the CI thread failed: {ci.problems[:1]}")
    per_item = calls_per_branch(simulator, PROJECT)
    tripped, reset = watch.tripped_and_reset()
    verdict.figures.update(
        items=len(ids),
        completed=int(phases.get("completed", 0)),
        failed=failed,
        faulted_calls=faulted,
        calls=len(simulator.log.records()),
        max_calls_per_item=max(per_item.values(), default=0),
        retry_after_violations=len(violations),
        breaker_tripped=tripped,
        breaker_reset=reset,
    )
    report.finish("gitlab_storm", verdict)
