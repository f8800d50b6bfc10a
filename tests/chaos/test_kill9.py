"""Scenario 1: three replicas run MR items to merge while one of them is SIGKILLed at a
chosen moment (between commit and MR creation, mid-merge, while acting on a webhook,
or at random) and restarted; the survivors and the restarted replica finish everything.

Figures: items lost and duplicated GitLab writes (target 0 / 0), and the time from a
kill to the next GitLab call about the item it interrupted (the recovery).
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from invariants import (
    Verdict,
    check_deliveries,
    check_gitlab_writes,
    check_items,
    stuck_items,
    wait_quiescent,
)
from replicas import Replica, replicas, service_config
from sizes import FULL
from strikes import KINDS, recovery_seconds, strike
from workload import PROJECT, GreenCI, Sender, all_finished, submission, wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

# Full: 50 kills in all, ten in each of five 200-item runs (the 50 rounds of a
# 200-item run, ten rounds sharing each run so the suite fits its budget on two cores).
RUNS, ITEMS, KILLS_PER_RUN = (5, 200, 10) if FULL else (1, 36, 4)
REPLICAS = 3


def restart(replica: Replica, after_seconds: float) -> None:
    time.sleep(after_seconds)
    replica.start()
    replica.wait_ready()


def test_kill9_at_random_points(chaos_db, conninfo, simulator, rng, report):
    config = service_config(simulator.url)
    verdict = Verdict()
    submitted: list[str] = []
    strikes = []
    recoveries: list[float] = []
    slowest: dict[str, float] = {}
    unrecovered = 0
    with replicas(REPLICAS, chaos_db.direct_url, config, simulator) as group:
        sender = Sender(group, rng)
        ci = GreenCI(simulator, sender)
        ci.start()
        pool = ThreadPoolExecutor(max_workers=REPLICAS + 1)
        restarts: list[Future[None]] = []
        try:
            chunk = ITEMS // KILLS_PER_RUN
            for run in range(RUNS):
                for round_number in range(KILLS_PER_RUN):
                    # Each round submits its share of the run, so every strike finds work.
                    first = round_number * chunk
                    submitting = pool.submit(
                        lambda first=first, run=run: [
                            sender.submit(submission(i, f"r{run}-"))
                            for i in range(first, first + chunk)
                        ]
                    )
                    kind = KINDS[(run * KILLS_PER_RUN + round_number) % len(KINDS)]
                    hit = strike(simulator, group, kind, rng)
                    submitted += submitting.result()
                    strikes.append(hit)
                    victim = next(r for r in group if r.name == hit.replica)
                    # Restarted after a moment, while the next round already goes on.
                    restarts.append(pool.submit(restart, victim, rng.uniform(0.2, 1.0)))
                for restarted in restarts:
                    restarted.result()
                wait_for(
                    lambda ids=list(submitted): all_finished(conninfo, ids),
                    timeout=240,
                    explain=lambda: stuck_items(conninfo),
                )
            recover_started = time.monotonic()
            wait_quiescent(conninfo)
            verdict.figures["settle_s"] = time.monotonic() - recover_started
        finally:
            pool.shutdown()
            ci.stop()
            sender.close()
        for hit in strikes:
            seconds = recovery_seconds(simulator, hit)
            if seconds is not None:
                recoveries.append(seconds)
                slowest[hit.kind] = max(slowest.get(hit.kind, 0.0), seconds)
            elif hit.branch is not None:
                unrecovered += 1
        tracebacks = sum(replica.tracebacks() for replica in group)
    check_items(conninfo, submitted, "completed", verdict, simulator, PROJECT)
    check_gitlab_writes(simulator, PROJECT, verdict)
    check_deliveries(conninfo, [d.key for d in ci.deliveries], verdict)
    verdict.check(not ci.problems, f"the CI thread failed: {ci.problems[:1]}")
    kinds = sorted({hit.kind for hit in strikes})
    verdict.figures.update(
        kills=len(strikes),
        kinds="/".join(f"{k}:{sum(h.kind == k for h in strikes)}" for k in kinds),
        recovery_p50_s=statistics.median(recoveries) if recoveries else 0.0,
        recovery_max_s=max(recoveries, default=0.0),
        recovery_max_by_kind="/".join(f"{k}:{v:.1f}" for k, v in sorted(slowest.items())),
        unrecovered=unrecovered,
        tracebacks=tracebacks,
    )
    report.finish("kill9", verdict)
