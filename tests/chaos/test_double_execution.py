"""Scenario 5 (full size only): three replicas share many MR items until at least ACTIONS
actions have run; zero concurrent double executions, and fairness across replicas.

An execution's GitLab calls for an item are made one after the other, so two calls
about the same item that overlap in time (arrival to answer, from the simulator's
request log) can only come from two executions of that item at once: each such pair
counts as an overlap. No side table or test hook in the service is needed. The actions
per replica come from each replica's `workqueue_actions_total`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest
from invariants import (
    Verdict,
    check_deliveries,
    check_gitlab_writes,
    check_items,
    item_branch,
    stuck_items,
    wait_quiescent,
)
from replicas import replicas, service_config
from workload import PROJECT, GreenCI, Sender, all_finished, submission, wait_for

from workqueue.testing.gitlab_simulator import GitLabSimulator

# Four waves take six minutes or more on two cores: past the suite's 300 s default, so
# the scenario carries `make chaos`'s limit and runs the same when started on its own.
pytestmark = [
    pytest.mark.chaos,
    pytest.mark.chaos_full_only,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
]

REPLICAS = 3
ACTIONS = 10_000
ITEMS_PER_WAVE = 1_000
SUBMITTERS = 4


def overlaps(simulator: GitLabSimulator) -> tuple[int, int]:
    """(overlapping pairs of calls about one item, of those from different replicas)."""
    branches = {
        head.iid: head.source_branch for head in simulator.merge_request_heads(PROJECT, state=None)
    }
    calls: dict[str, list[tuple[float, float, str | None]]] = defaultdict(list)
    for record in simulator.log.records():
        branch = item_branch(record, branches)
        if branch is not None and record.started_at is not None:
            calls[branch].append((record.started_at, record.at, record.caller))
    pairs = across = 0
    for sequence in calls.values():
        sequence.sort()
        for index, (_, answered, caller) in enumerate(sequence):
            for later_start, _, later_caller in sequence[index + 1 :]:
                if later_start >= answered:
                    break
                pairs += 1
                across += later_caller != caller
    return pairs, across


def actions_of(replica) -> float:
    return sum(replica.metric("workqueue_actions_total").values())


def test_no_double_execution_across_three_replicas(chaos_db, conninfo, simulator, rng, report):
    verdict = Verdict()
    submitted: list[str] = []
    wave_seconds: list[float] = []
    with replicas(REPLICAS, chaos_db.direct_url, service_config(simulator.url), simulator) as group:
        sender = Sender(group, rng)
        ci = GreenCI(simulator, sender)
        ci.start()
        try:
            wave = 0
            while sum(actions_of(r) for r in group) < ACTIONS:
                started = time.monotonic()
                with ThreadPoolExecutor(SUBMITTERS) as pool:
                    submitted += pool.map(
                        lambda i, w=wave: sender.submit(submission(i, f"w{w}-")),
                        range(ITEMS_PER_WAVE),
                    )
                wave += 1
                wait_for(
                    lambda ids=list(submitted): all_finished(conninfo, ids),
                    timeout=300,
                    explain=lambda: stuck_items(conninfo),
                )
                wave_seconds.append(time.monotonic() - started)
                # Shown with the captured output if a later wave fails.
                print(f"wave {wave}: {wave_seconds[-1]:.0f} s, {len(set(submitted))} items")
            wait_quiescent(conninfo)
            per_replica = {r.name: actions_of(r) for r in group}
        finally:
            ci.stop()
            sender.close()
    check_items(conninfo, submitted, "completed", verdict)
    check_gitlab_writes(simulator, PROJECT, verdict)
    check_deliveries(conninfo, [d.key for d in ci.deliveries], verdict)
    pairs, across = overlaps(simulator)
    verdict.check(
        pairs == 0, f"{pairs} overlapping calls about one item ({across} across replicas)"
    )
    total = sum(per_replica.values())
    shares = {name: n / total for name, n in per_replica.items()} if total else {}
    verdict.figures.update(
        actions=int(total),
        overlaps=pairs,
        overlaps_across_replicas=across,
        actions_per_replica="/".join(f"{n}:{int(v)}" for n, v in sorted(per_replica.items())),
        min_share=min(shares.values(), default=0.0),
        max_share=max(shares.values(), default=0.0),
        items=len(set(submitted)),
        wave_seconds="/".join(f"{seconds:.0f}" for seconds in wave_seconds),
    )
    report.finish("double_execution", verdict)
