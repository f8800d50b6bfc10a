"""Scenario 4: webhook abuse against two replicas. Every item has an open MR (submitted
with auto_merge off, so it stays active and every event it gets stays countable).
Then, all at once and shuffled: each item's Pipeline Hooks with `success` delivered
before `running` (reordering), every delivery sent three times with its key to random
replicas concurrently (duplicates), Merge Request Hooks resent as new deliveries,
hooks about projects the service has never seen, up to BURST deliveries in all.

Checks: each distinct delivery is applied exactly once (per item, the audit holds one
event entry per distinct delivery about it, none for duplicates or unknown projects);
no status regression (every head pipeline ends `success`, never back to `running`);
memory stays bounded (RSS reported before and after; at most RSS_LIMIT_MIB).
"""

from __future__ import annotations

import copy
import random
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from invariants import Verdict, check_deliveries, check_gitlab_writes, check_items, stuck_items
from replicas import replicas, service_config
from sizes import FULL
from workload import PROJECT, Sender, submission, wait_for

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

REPLICAS = 2
ITEMS, BURST = (50, 10_002) if FULL else (20, 1_000)
COPIES = 3  # each delivery sent this many times with the same key
UNKNOWN_SHARE = 0.1  # of the burst: hooks about projects nobody knows
# The made-up projects those hooks name. GitLab's "not found" for each is held by the
# service, so the burst costs each replica one look-up per made-up project; more of
# them than the look-up budget (60 a minute per secret, api.webhook_lookup_budget)
# would only measure that budget's wait, which tests/webhooks covers.
UNKNOWN_PROJECTS = 12
SENDERS = 8
RSS_LIMIT_MIB = 512
EVENT_ENTRIES = ("event_applied", "event_ignored", "event_stale")


def open_items(simulator: GitLabSimulator, sender: Sender, conninfo: str) -> dict[str, int]:
    """Submit ITEMS items without auto-merge; returns item id -> MR iid once all are open."""
    ids = [sender.submit({**submission(i, "abuse-"), "auto_merge": False}) for i in range(ITEMS)]

    def opened() -> dict[str, int]:
        with psycopg.connect(conninfo) as connection:
            rows = connection.execute(
                "SELECT id::text, mr_iid FROM mr_details WHERE mr_iid IS NOT NULL"
            ).fetchall()
        return {item: iid for item, iid in rows if item in ids}

    wait_for(lambda: len(opened()) == ITEMS, timeout=120, explain=lambda: stuck_items(conninfo))
    return opened()


def pipeline_pair(simulator: GitLabSimulator, iid: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(running, success) hooks of one pipeline on the MR head."""
    pipeline = simulator.create_pipeline(
        PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="running")]
    )
    running = simulator.pipeline_hook(pipeline)
    (job,) = simulator.jobs(pipeline)
    simulator.set_job_status(job["id"], "success")
    return running, simulator.pipeline_hook(pipeline)


def unknown_project(payload: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    stranger = copy.deepcopy(payload)
    number = 10_000 + rng.randrange(UNKNOWN_PROJECTS)
    stranger["project"]["id"] = number
    stranger["project"]["path_with_namespace"] = f"nobody/project-{number}"
    return stranger


Delivery = tuple[str, str, dict[str, Any], str | None]  # key, event header, payload, item


def build_deliveries(
    simulator: GitLabSimulator, mrs: dict[str, int], rng: random.Random
) -> list[Delivery]:
    deliveries: list[Delivery] = []
    for item, iid in mrs.items():
        running, success = pipeline_pair(simulator, iid)
        # Reordered: the outcome first, then the older "running".
        deliveries += [(str(uuid.uuid4()), "Pipeline Hook", p, item) for p in (success, running)]
    template = deliveries[0][2]
    for _ in range(int(BURST * UNKNOWN_SHARE)):
        deliveries.append(
            (str(uuid.uuid4()), "Pipeline Hook", unknown_project(template, rng), None)
        )
    items = list(mrs.items())
    while len(deliveries) < BURST // COPIES:
        item, iid = rng.choice(items)
        hook = simulator.merge_request_hook(PROJECT, iid, action="update")
        deliveries.append((str(uuid.uuid4()), "Merge Request Hook", hook, item))
    return deliveries


def judge(
    conninfo: str, deliveries: list[Delivery], answers: list[tuple[str, str]], verdict: Verdict
) -> None:
    expected = Counter(item for _, _, _, item in deliveries if item is not None)
    applied = _event_entries(conninfo)
    wrong = {i: (applied.get(i, 0), n) for i, n in expected.items() if applied.get(i, 0) != n}
    verdict.check(not wrong, f"items with events not applied once: {list(wrong.items())[:3]}")
    strays = sum(n for item, n in applied.items() if item not in expected)
    verdict.check(strays == 0, f"{strays} event entries for items no delivery was about")
    statuses = _head_statuses(conninfo)
    regressed = {item: s for item, s in statuses.items() if s != "success"}
    verdict.check(not regressed, f"head pipelines not success: {list(regressed.items())[:3]}")
    answered: dict[str, set[str]] = {}
    for key, answer in answers:
        answered.setdefault(key, set()).add(answer)
    never_duplicate = sum("duplicate" not in seen for seen in answered.values())
    verdict.check(never_duplicate == 0, f"{never_duplicate} repeated keys never answered duplicate")
    verdict.figures.update(
        deliveries=len(answers),
        distinct=len(deliveries),
        unknown_project=sum(item is None for _, _, _, item in deliveries),
        answers="/".join(f"{k}:{v}" for k, v in sorted(Counter(a for _, a in answers).items())),
        event_entries=sum(applied.values()),
        misapplied_items=len(wrong),
        status_regressions=len(regressed),
    )


def test_webhook_abuse(chaos_db, conninfo, simulator, rng, report):
    verdict = Verdict()
    config = service_config(simulator.url)
    with replicas(REPLICAS, chaos_db.direct_url, config, simulator) as group:
        sender = Sender(group, rng)
        try:
            mrs = open_items(simulator, sender, conninfo)
            deliveries = build_deliveries(simulator, mrs, rng)
            sends = [delivery for delivery in deliveries for _ in range(COPIES)]
            rng.shuffle(sends)
            rss_before = max(r.rss_mib() or 0.0 for r in group)
            with ThreadPoolExecutor(SENDERS) as pool:
                answers = list(pool.map(lambda d: (d[0], sender.webhook(d[2], d[0], d[1])), sends))
            wait_for(
                lambda: _events_left(conninfo) == 0 and _actionable(conninfo) == 0,
                timeout=300,
                explain=lambda: stuck_items(conninfo),
            )
            rss_after = max(r.rss_mib() or 0.0 for r in group)
        finally:
            sender.close()
    check_items(conninfo, list(mrs), "active", verdict)
    check_gitlab_writes(simulator, PROJECT, verdict)
    check_deliveries(conninfo, [key for key, _, _, _ in deliveries], verdict)
    judge(conninfo, deliveries, answers, verdict)
    verdict.check(rss_after <= RSS_LIMIT_MIB, f"RSS {rss_after:.0f} MiB over {RSS_LIMIT_MIB} MiB")
    verdict.figures.update(
        rss_before_mib=rss_before,
        rss_after_mib=rss_after,
        slowest_answer_s=sender.answers.slowest_seconds,
    )
    report.finish("webhook_abuse", verdict)


def _scalar(conninfo: str, query: str) -> int:
    with psycopg.connect(conninfo) as connection:
        row = connection.execute(query).fetchone()
    return int(row[0]) if row else 0


def _events_left(conninfo: str) -> int:
    return _scalar(
        conninfo,
        "SELECT (SELECT count(*) FROM pending_events) + (SELECT count(*) FROM incoming_deliveries)",
    )


def _actionable(conninfo: str) -> int:
    return _scalar(conninfo, "SELECT count(*) FROM work_items WHERE actionable")


def _event_entries(conninfo: str) -> Counter[str]:
    with psycopg.connect(conninfo) as connection:
        rows = connection.execute(
            "SELECT work_item_id::text, count(*) FROM audit_entries "
            "WHERE event_type = ANY(%s) GROUP BY 1",
            (list(EVENT_ENTRIES),),
        ).fetchall()
    return Counter({item: int(n) for item, n in rows})


def _head_statuses(conninfo: str) -> dict[str, str | None]:
    with psycopg.connect(conninfo) as connection:
        rows = connection.execute(
            "SELECT id::text, head_pipeline_status FROM mr_details"
        ).fetchall()
    return dict(rows)
