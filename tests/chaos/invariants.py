"""What must hold after every scenario, read from the database and the simulator's
request log — never from the service's own answers about itself.

* every accepted submission is processed (its item ended in the expected phase);
* every acknowledged webhook delivery is recorded and no event is left unprocessed;
* no MR is created twice for a branch;
* no branch gets a second commit for the same content;
* no item is left actionable with nothing leasing it;
* no phase goes backwards in the audit history, and that history is complete
  (submission, and a phase change to where the item is now).
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import psycopg

from workqueue.testing.gitlab_simulator import GitLabSimulator, RequestRecord

TERMINAL = {"completed", "cancelled", "failed"}
COMMITS = "/projects/:id/repository/commits"
MERGE_REQUESTS = "/projects/:id/merge_requests"
_MR_PATH = re.compile(r"/merge_requests/(\d+)")
_BRANCH_PATH = re.compile(r"/repository/branches/([^/]+)$")


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def check(self, ok: bool, problem: str) -> None:
        if not ok:
            self.problems.append(problem)


def _ok(record: RequestRecord) -> bool:
    return 200 <= record.status < 300


def item_branch(record: RequestRecord, branch_of_iid: dict[int, str]) -> str | None:
    """The bot branch (= the item) a GitLab call was about, when the call says."""
    body = record.body if isinstance(record.body, dict) else {}
    if record.route == COMMITS and record.method == "POST":
        return body.get("branch")
    if record.route == MERGE_REQUESTS:
        return body.get("source_branch") or record.query.get("source_branch")
    if (match := _MR_PATH.search(record.path)) is not None:
        return branch_of_iid.get(int(match.group(1)))
    if (match := _BRANCH_PATH.search(record.path)) is not None:
        return unquote(match.group(1))
    if record.route is not None and record.route.endswith("/compare"):
        return record.query.get("to")
    return None


def calls_per_branch(simulator: GitLabSimulator, project: str) -> Counter[str]:
    branch_of_iid = {mr["iid"]: mr["source_branch"] for mr in simulator.merge_requests(project)}
    counts: Counter[str] = Counter()
    for record in simulator.log.records():
        branch = item_branch(record, branch_of_iid)
        if branch is not None:
            counts[branch] += 1
    return counts


def check_gitlab_writes(simulator: GitLabSimulator, project: str, verdict: Verdict) -> None:
    commits = Counter(
        r.body.get("branch")
        for r in simulator.log.records("POST", COMMITS)
        if _ok(r) and isinstance(r.body, dict)
    )
    created = Counter(
        r.body.get("source_branch")
        for r in simulator.log.records("POST", MERGE_REQUESTS)
        if _ok(r) and isinstance(r.body, dict)
    )
    per_branch = Counter(mr["source_branch"] for mr in simulator.merge_requests(project))
    second_commits = sum(n - 1 for n in commits.values() if n > 1)
    second_mrs = sum(n - 1 for n in created.values() if n > 1)
    verdict.figures["duplicate_commits"] = second_commits
    verdict.figures["duplicate_mrs"] = second_mrs
    verdict.check(
        second_commits == 0,
        "branches with a second commit of the same content: "
        + ", ".join(sorted(b for b, n in commits.items() if n > 1)[:5]),
    )
    verdict.check(
        second_mrs == 0 and all(n == 1 for n in per_branch.values()),
        "branches with more than one MR: "
        + ", ".join(sorted(b for b, n in per_branch.items() if n > 1)[:5]),
    )
    verdict.check(simulator.errors == [], f"simulator handler crashes: {simulator.errors[:1]}")


def _rows(conninfo: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo) as connection:
        return connection.execute(query, params).fetchall()


def wait_quiescent(conninfo: str, timeout: float = 30) -> int:
    """Wait until no item is actionable; returns how many still are at the end."""
    deadline = time.monotonic() + timeout
    while True:
        ((left,),) = _rows(conninfo, "SELECT count(*) FROM work_items WHERE actionable")
        if left == 0 or time.monotonic() > deadline:
            return int(left)
        time.sleep(0.25)


def check_items(
    conninfo: str,
    item_ids: Iterable[str],
    expected_phase: str,
    verdict: Verdict,
    simulator: GitLabSimulator | None = None,
    project: str = "",
) -> None:
    ids = sorted(set(item_ids))
    rows = dict(
        _rows(conninfo, "SELECT id::text, phase FROM work_items WHERE id::text = ANY(%s)", ids)
    )
    lost = [item for item in ids if rows.get(item) != expected_phase]
    verdict.figures["items"] = len(ids)
    verdict.figures["items_lost"] = len(lost)
    verdict.check(
        not lost,
        f"{len(lost)} accepted items not {expected_phase}: "
        + "; ".join(describe_item(conninfo, item) for item in lost[:3]),
    )
    if simulator is not None:
        for item in lost[:3]:
            for (branch,) in _rows(
                conninfo, "SELECT source_branch FROM mr_details WHERE id::text = %s", item
            ):
                print(
                    f"GitLab calls about {branch}: ",
                    describe_gitlab_calls(simulator, project, branch),
                )
    orphans = _rows(
        conninfo,
        "SELECT id::text, phase FROM work_items WHERE actionable "
        "AND (leased_until IS NULL OR leased_until < now()) "
        "AND (next_attempt_at IS NULL OR next_attempt_at < now())",
    )
    verdict.figures["orphaned_actionable"] = len(orphans)
    verdict.check(not orphans, f"actionable items nothing leases: {orphans[:5]}")
    check_history(conninfo, ids, rows, verdict)


def describe_item(conninfo: str, item: str) -> str:
    """An item's phase, error and audit trail, so a failed run says what happened."""
    ((phase, attempts, error),) = _rows(
        conninfo, "SELECT phase, attempts, error FROM work_items WHERE id::text = %s", item
    ) or [(None, None, None)]
    trail = _rows(
        conninfo,
        "SELECT to_char(occurred_at, 'HH24:MI:SS.MS'), event_type, reason, details::text "
        "FROM audit_entries WHERE work_item_id::text = %s ORDER BY id",
        item,
    )
    steps = " | ".join(
        f"{at} {event} {reason or ''} {details}" for at, event, reason, details in trail
    )
    others = _rows(
        conninfo,
        "SELECT w.id::text, w.phase, w.created_at::text FROM work_items w "
        "JOIN mr_details d ON d.id = w.id WHERE d.source_branch = "
        "(SELECT source_branch FROM mr_details WHERE id::text = %s) AND w.id::text <> %s",
        item,
        item,
    )
    branch = _rows(conninfo, "SELECT source_branch FROM mr_details WHERE id::text = %s", item)
    return (
        f"{item}={phase} attempts={attempts} error={error!r} branch={branch} trail: {steps}"
        f" other items of the branch: {others}"
    )


def describe_gitlab_calls(simulator: GitLabSimulator, project: str, branch: str) -> str:
    """Every GitLab call the simulator logged about one bot branch, in order."""
    branch_of_iid = {mr["iid"]: mr["source_branch"] for mr in simulator.merge_requests(project)}
    return " | ".join(
        f"{record.started_at} {record.caller} {record.method} {record.path} {record.status}"
        for record in simulator.log.records()
        if item_branch(record, branch_of_iid) == branch
    )


def check_history(conninfo: str, ids: list[str], phases: dict[str, str], verdict: Verdict) -> None:
    entries = _rows(
        conninfo,
        "SELECT work_item_id::text, event_type, before ->> 'phase', after ->> 'phase' "
        "FROM audit_entries WHERE work_item_id::text = ANY(%s) "
        "AND event_type IN ('item_submitted', 'phase_change') ORDER BY id",
        ids,
    )
    submitted: set[str] = set()
    chain: dict[str, list[tuple[str | None, str | None]]] = defaultdict(list)
    for item, event_type, before, after in entries:
        if event_type == "item_submitted":
            submitted.add(item)
        else:
            chain[item].append((before, after))
    regressions: list[str] = []
    incomplete: list[str] = []
    for item in ids:
        current = "active"
        for before, after in chain[item]:
            # failed -> active is a retry, which the scenarios never ask for.
            if before != current or current in TERMINAL:
                regressions.append(f"{item}: {before}->{after} after {current}")
            current = after or current
        if item not in submitted:
            incomplete.append(f"{item}: no item_submitted entry")
        if current != phases.get(item):
            incomplete.append(f"{item}: history ends {current}, item is {phases.get(item)}")
    verdict.figures["phase_regressions"] = len(regressions)
    verdict.figures["incomplete_histories"] = len(incomplete)
    verdict.check(not regressions, f"phases going backwards: {regressions[:3]}")
    verdict.check(not incomplete, f"incomplete audit history: {incomplete[:3]}")


def check_deliveries(conninfo: str, acknowledged: Iterable[str], verdict: Verdict) -> None:
    """Every delivery answered accepted/ignored is recorded; no event waits unprocessed."""
    keys = sorted(set(acknowledged))
    recorded = {
        key
        for (key,) in _rows(
            conninfo,
            "SELECT delivery_key FROM received_deliveries WHERE delivery_key = ANY(%s)",
            keys,
        )
    }
    lost = [key for key in keys if key not in recorded]
    # Stored deliveries wait in incoming_deliveries (0010) until resolved into events.
    ((pending,),) = _rows(
        conninfo,
        "SELECT (SELECT count(*) FROM pending_events) + (SELECT count(*) FROM incoming_deliveries)",
    )
    verdict.figures["webhooks_acknowledged"] = len(keys)
    verdict.figures["webhooks_lost"] = len(lost)
    verdict.check(not lost, f"{len(lost)} acknowledged deliveries not recorded: {lost[:3]}")
    verdict.check(pending == 0, f"{pending} deliveries or events never processed")


def stuck_items(conninfo: str, limit: int = 5) -> list[tuple[Any, ...]]:
    """Items still active, with what they wait for: for the message when a run stalls."""
    return _rows(
        conninfo,
        "SELECT w.id::text, w.actionable, w.attempts, left(w.error, 120), "
        "  w.leased_until > now() AS leased, d.mr_iid, d.detailed_merge_status, "
        "  (SELECT string_agg(s.dimension || '=' || s.status, ',') "
        "   FROM work_item_statuses AS s WHERE s.work_item_id = w.id) "
        "FROM work_items AS w LEFT JOIN mr_details AS d ON d.id = w.id "
        "WHERE w.phase = 'active' ORDER BY w.created_at LIMIT %s",
        limit,
    )
