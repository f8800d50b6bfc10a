"""Scenario 2: the database connection is cut under load. Every replica reaches PostgreSQL
through a TCP proxy that drops all connections, stalls them (2 s per chunk) and
black-holes them, in random order during a steady load of submissions, CI and
webhooks; PostgreSQL itself is restarted twice (`pg_ctl stop -m immediate`, down for
a moment, started again).

Figures: acknowledged webhooks lost (target 0); answers while the database was down
(expected 503 with `Retry-After`, and no hang: none slower than HANG_SECONDS); the
time from the database's return until every replica is ready and a submission goes
through (recovery).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import httpx
import pytest
from invariants import (
    Verdict,
    check_deliveries,
    check_gitlab_writes,
    check_items,
    stuck_items,
    wait_quiescent,
)
from probes import Probe, Prober, SteadySubmitter
from replicas import replicas, service_config
from sizes import FULL
from tcp_proxy import running_proxy
from workload import PROJECT, GreenCI, Sender, submission, terminal_count, wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

REPLICAS = 3
# Each cycle: one connection fault of each kind, in random order, then a restart.
CYCLES = 4 if FULL else 1
RESTARTS = 2  # the two restarts (the short version too: they are the point)
DOWN_SECONDS = 2.0
STALL_SECONDS = 2.0
BLACKHOLE_SECONDS = 3.0
CALM_SECONDS = 2.0
HANG_SECONDS = 15.0
SUBMISSIONS_PER_SECOND = 4


def _ready(group) -> bool:
    try:
        return all(
            httpx.get(f"{replica.base_url}/readyz", timeout=2).status_code == 200
            for replica in group
        )
    except httpx.HTTPError:
        return False


@dataclass
class Outages:
    faults: list[str] = field(default_factory=list)
    down_windows: list[tuple[float, float]] = field(default_factory=list)
    recoveries: list[float] = field(default_factory=list)
    recovery_items: list[str] = field(default_factory=list)


def restart_database(chaos_db, group, sender, outages: Outages) -> None:
    down_at = time.time()
    chaos_db.cluster.kill()
    time.sleep(DOWN_SECONDS)
    chaos_db.cluster.restart_server()
    outages.down_windows.append((down_at, time.time()))
    back = time.monotonic()
    wait_for(lambda: _ready(group), timeout=60, interval=0.05)
    tag = f"probe-{len(outages.recoveries)}-"
    outages.recovery_items.append(sender.submit(submission(0, tag)))
    outages.recoveries.append(time.monotonic() - back)
    outages.faults.append("restart")


def cut_connections(proxy, fault: str, outages: Outages) -> None:
    outages.faults.append(fault)
    if fault == "drop":
        proxy.drop()
    elif fault == "stall":
        proxy.stall(STALL_SECONDS)
        time.sleep(2 * STALL_SECONDS)
        proxy.unstall()
    else:
        proxy.blackhole(BLACKHOLE_SECONDS)


def judge(probes: list[Probe], outages: Outages, verdict: Verdict) -> None:
    def while_down(probe: Probe) -> bool:
        return any(start <= probe.started <= end for start, end in outages.down_windows)

    down = [p for p in probes if while_down(p)]
    down_5xx = [p for p in down if p.status is not None and p.status >= 500]
    proper = [p for p in down_5xx if p.status == 503 and p.retry_after is not None]
    hangs = [p for p in probes if p.seconds > HANG_SECONDS]
    verdict.check(not hangs, f"{len(hangs)} requests took longer than {HANG_SECONDS} s")
    verdict.check(
        len(proper) == len(down_5xx),
        f"{len(down_5xx) - len(proper)} answers while the database was down were 5xx "
        "other than 503 with Retry-After: "
        + ", ".join(sorted({f"{p.kind}:{p.status}:{p.retry_after}" for p in down_5xx})),
    )
    verdict.figures.update(
        faults=len(outages.faults),
        probes=len(probes),
        down_probes=len(down),
        down_5xx=len(down_5xx),
        down_503_retry_after=len(proper),
        down_no_answer=sum(p.status is None for p in down),
        hangs=len(hangs),
        slowest_probe_s=max((p.seconds for p in probes), default=0.0),
        recovery_p50_s=statistics.median(outages.recoveries) if outages.recoveries else 0.0,
        recovery_max_s=max(outages.recoveries, default=0.0),
    )


def test_database_connection_cuts_and_restarts(chaos_db, conninfo, simulator, rng, report):
    verdict = Verdict()
    outages = Outages()
    with running_proxy(chaos_db.socket_path) as proxy:
        config = service_config(simulator.url)
        with replicas(REPLICAS, chaos_db.tcp_url(proxy.port), config, simulator) as group:
            sender = Sender(group, rng)
            ci = GreenCI(simulator, sender)
            submitter = SteadySubmitter(sender, SUBMISSIONS_PER_SECOND)
            unrelated = simulator.create_pipeline(PROJECT, ref="main", status="success")
            prober = Prober(group, simulator.pipeline_hook(unrelated))
            for loop in (ci, submitter, prober):
                loop.start()
            try:
                plan = ["drop", "stall", "blackhole"] * CYCLES
                rng.shuffle(plan)
                restart_at = {len(plan) * (n + 1) // (RESTARTS + 1) for n in range(RESTARTS)}
                for index, fault in enumerate(plan):
                    time.sleep(CALM_SECONDS)
                    if index in restart_at:
                        restart_database(chaos_db, group, sender, outages)
                        time.sleep(CALM_SECONDS)
                    cut_connections(proxy, fault, outages)
                time.sleep(CALM_SECONDS)
            finally:
                submitter.stop()
            items = submitter.item_ids + outages.recovery_items
            try:
                wait_for(
                    lambda: terminal_count(conninfo) >= len(items),
                    timeout=240,
                    explain=lambda: stuck_items(conninfo),
                )
                wait_quiescent(conninfo)
            finally:
                prober.stop()
                ci.stop()
                sender.close()
            tracebacks = sum(replica.tracebacks() for replica in group)
        aborted = proxy.counters.aborted

    acknowledged = [p.key for p in prober.probes if p.answer is not None and p.key is not None]
    acknowledged += [d.key for d in ci.deliveries]
    check_items(conninfo, items, "completed", verdict)
    check_gitlab_writes(simulator, PROJECT, verdict)
    check_deliveries(conninfo, acknowledged, verdict)
    verdict.check(not (ci.problems or submitter.problems or prober.problems), "a load thread died")
    judge(prober.probes, outages, verdict)
    verdict.figures.update(proxy_aborted=aborted, tracebacks=tracebacks)
    report.finish("db_cuts", verdict)
