"""Attack-review of the attention reconciler's batch path (4501d28): a person's members are
never pruned, a concurrent manual change between the page read and the write is seen,
and a stop asked mid-page leaves the rest for later with no audit for unwritten rows.
Real PostgreSQL."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "integration" / "attention"))

from attention_support import create_mr, members, reconciler, set_phase

from workqueue.attention import repository, writer
from workqueue.attention.config import QueueRule
from workqueue.queue.enqueue import advisory_lock_key

RULES = [QueueRule(name="pruned", match={"phase": ["failed"]}, prune=True)]


def _setup(sessions, count: int) -> tuple[list[uuid.UUID], list[int], int]:
    with sessions() as session:
        items = [create_mr(session, "p", phase="failed") for _ in range(count)]
        session.commit()
    attention = reconciler(sessions, RULES)
    attention.apply_rules()
    with sessions() as session:
        queue = next(q for q in repository.served_queues(session) if q.name == "pruned")
    return items, [queue.id], queue.id


def test_a_person_added_member_that_stops_matching_is_not_pruned(sessions):
    items, queue_ids, queue_id = _setup(sessions, 3)
    by_person, by_rule, added_meanwhile = items
    with sessions() as session:
        repository.add_member(session, queue_id, by_person, "alice")
        repository.add_member(session, queue_id, by_rule, repository.RULE_ACTOR)
        for item in (by_person, by_rule, added_meanwhile):
            set_phase(session, item, "active")
        session.commit()

    def person_adds(item_id: uuid.UUID) -> None:
        # Between the page read and the write, a person adds the third item by hand.
        if item_id == added_meanwhile:
            with sessions() as other:
                repository.add_member(other, queue_id, added_meanwhile, "bob")
                other.commit()

    with sessions() as session:
        outcome = writer.reconcile_items(
            session,
            reconciler(sessions, RULES).readers,
            queue_ids,
            items,
            check_row=person_adds,
        )
        session.commit()
    assert members(sessions, "pruned") == {by_person, added_meanwhile}
    assert [(e.event_type, e.work_item_id) for e in outcome.audit] == [
        ("attention_removed", by_rule)
    ]
    assert outcome.failed == []


def test_a_stop_mid_page_writes_and_audits_only_the_rows_before_it(sessions):
    items, queue_ids, _ = _setup(sessions, 5)
    ordered = sorted(items, key=advisory_lock_key)
    asked = 0

    def stop_after_two() -> bool:
        nonlocal asked
        asked += 1
        return asked > 2

    with sessions() as session:
        outcome = writer.reconcile_items(
            session,
            reconciler(sessions, RULES).readers,
            queue_ids,
            items,
            should_stop=stop_after_two,
        )
        session.commit()
    assert outcome.stopped
    assert members(sessions, "pruned") == set(ordered[:2])
    assert sorted(e.work_item_id for e in outcome.audit) == sorted(ordered[:2])
    assert outcome.written == 2
