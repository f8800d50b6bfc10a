"""`ingest_event` and `prune_deliveries`: the generic, source-independent part (sample type)."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sample_type import SAMPLE_TYPE, Behaviour, build_registry, create_item

from workqueue.db.transactions import run_in_transaction
from workqueue.queue.intake.pending_events import (
    MAX_DELIVERY_KEY_LENGTH,
    IngestResult,
    ingest_event,
    normalize_delivery_key,
    parse_event_body,
    prune_deliveries,
)


def resolve_targets(session, body):
    """Test resolver: the active items listed in `targets`."""
    wanted = [uuid.UUID(value) for value in body.get("targets", [])]
    rows = session.execute(
        sa.text("SELECT id FROM work_items WHERE id = ANY(:ids) AND phase = 'active'"),
        {"ids": wanted},
    ).all()
    return [row.id for row in rows]


@pytest.fixture
def registry():
    registry = build_registry(Behaviour())
    registry.get(SAMPLE_TYPE).add_resolver("poke", resolve_targets)
    return registry


@pytest.fixture
def items(sessions):
    with sessions() as session:
        ids = [create_item(session, [], notify=False) for _ in range(3)]
        session.execute(sa.text("UPDATE work_items SET actionable = false"))
        session.commit()
    return ids


def ingest(sessions, registry, *, key, targets=(), event_type="poke", source="webhook", **extra):
    body = {"targets": [str(t) for t in targets], **extra}
    return run_in_transaction(
        sessions,
        lambda session: ingest_event(
            session, registry, source=source, delivery_key=key, event_type=event_type, body=body
        ),
    )


def table(sessions, sql):
    with sessions() as session:
        return [tuple(row) for row in session.execute(sa.text(sql)).all()]


def test_an_event_is_stored_once_per_item_and_marks_them_actionable(sessions, registry, items):
    result = ingest(sessions, registry, key="d-1", targets=items[:2])

    assert result.status == "accepted"
    assert sorted(result.item_ids) == sorted(items[:2])
    assert sorted(
        table(sessions, "SELECT work_item_id, event_type, dedupe_key FROM pending_events")
    ) == sorted((item, "poke", f"d-1:{item}") for item in items[:2])
    assert sorted(table(sessions, "SELECT id FROM work_items WHERE actionable")) == sorted(
        (item,) for item in items[:2]
    )
    assert table(sessions, "SELECT delivery_key, source, event_type FROM received_deliveries") == [
        ("d-1", "webhook", "poke")
    ]


def test_a_redelivery_is_a_duplicate_and_writes_nothing(sessions, registry, items):
    ingest(sessions, registry, key="d-1", targets=items[:1])
    with sessions() as session:
        session.execute(sa.text("UPDATE work_items SET actionable = false"))
        session.commit()

    # Even resolving to other items now: the delivery was seen, nothing is written.
    result = ingest(sessions, registry, key="d-1", targets=items)

    assert result == IngestResult("duplicate", [])
    assert len(table(sessions, "SELECT id FROM pending_events")) == 1
    assert table(sessions, "SELECT id FROM work_items WHERE actionable") == []


def test_no_item_concerned_is_ignored_but_the_delivery_is_remembered(sessions, registry, items):
    first = ingest(sessions, registry, key="d-2", targets=[uuid.uuid4()])
    second = ingest(sessions, registry, key="d-2", targets=items)

    assert (first.status, second.status) == ("ignored", "duplicate")
    assert table(sessions, "SELECT id FROM pending_events") == []


def test_terminal_items_are_not_resolved(sessions, registry, items):
    with sessions() as session:
        session.execute(
            sa.text("UPDATE work_items SET phase = 'completed' WHERE id = :id"), {"id": items[0]}
        )
        session.commit()

    result = ingest(sessions, registry, key="d-3", targets=items[:2])

    assert result.item_ids == [items[1]]


def test_an_event_type_no_type_resolves_touches_no_table(sessions, registry, items):
    result = ingest(sessions, registry, key="d-4", targets=items, event_type="unknown")

    assert result == IngestResult("ignored", [])
    assert table(sessions, "SELECT delivery_key FROM received_deliveries") == []


def test_without_a_delivery_key_nothing_is_deduplicated(sessions, registry, items):
    statuses = [ingest(sessions, registry, key=None, targets=items[:1]).status for _ in range(2)]

    assert statuses == ["accepted", "accepted"]
    assert table(sessions, "SELECT dedupe_key FROM pending_events") == [(None,), (None,)]
    assert table(sessions, "SELECT delivery_key FROM received_deliveries") == []


def test_events_still_stored_after_their_delivery_was_pruned_are_not_stored_again(
    sessions, registry, items
):
    ingest(sessions, registry, key="d-5", targets=items[:1])
    with sessions() as session:
        session.execute(sa.text("DELETE FROM received_deliveries"))
        session.commit()

    result = ingest(sessions, registry, key="d-5", targets=items[:1])

    assert result == IngestResult("duplicate", [])
    assert len(table(sessions, "SELECT id FROM pending_events")) == 1


def test_long_delivery_keys_are_stored_as_their_hash(sessions, registry, items):
    key = "k" * (MAX_DELIVERY_KEY_LENGTH + 1)

    statuses = [ingest(sessions, registry, key=key, targets=items[:1]).status for _ in range(2)]

    assert statuses == ["accepted", "duplicate"]
    [(stored,)] = table(sessions, "SELECT delivery_key FROM received_deliveries")
    assert stored == normalize_delivery_key(key)
    assert stored.startswith("sha256:")
    assert normalize_delivery_key("short") == "short"


def test_nul_and_lone_surrogates_are_made_storable(sessions, registry, items):
    result = ingest(
        sessions, registry, key="d-6", targets=items[:1], text="a\x00b\ud800", nested=[{"k\x00": 1}]
    )

    assert result.status == "accepted"
    [(body,)] = table(sessions, "SELECT body FROM pending_events")
    assert body["text"] == "ab?"
    assert body["nested"] == [{"k": 1}]


def test_a_source_longer_than_its_column_is_refused(sessions, registry):
    with pytest.raises(ValueError, match="source"):
        ingest(sessions, registry, key="d-7", source="s" * 33)


def test_concurrent_deliveries_over_overlapping_items_all_land(sessions, registry, items):
    """Different deliveries touching the same items, in different orders: no deadlock, no loss."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(12)

    def deliver(n):
        try:
            barrier.wait()
            targets = items if n % 2 else list(reversed(items))
            ingest(sessions, registry, key=f"c-{n}", targets=targets)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(table(sessions, "SELECT id FROM pending_events")) == 12 * len(items)


def test_prune_forgets_only_deliveries_older_than_the_retention(sessions, registry, items):
    for key in ("old-1", "old-2", "new"):
        ingest(sessions, registry, key=key, targets=items[:1])
    with sessions() as session:
        session.execute(
            sa.text(
                "UPDATE received_deliveries SET received_at = now() - interval '8 days' "
                "WHERE delivery_key LIKE 'old-%'"
            )
        )
        session.commit()

    with sessions() as session:
        pruned = prune_deliveries(session, timedelta(days=7))
        session.commit()

    assert pruned == 2
    assert table(sessions, "SELECT delivery_key FROM received_deliveries") == [("new",)]
    with sessions() as session:
        assert prune_deliveries(session) == 0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"a": 1}', {"a": 1}),
        ('{"a": "\\u00e9"}', {"a": "é"}),
        (b"[]", None),
        (b"", None),
        (b'{"a": Infinity}', None),
        (b'{"a": NaN}', None),
        (b"\xc3\x28", None),
        (b"[" * 50_000, None),
        # The same strictness as API bodies: SQS messages arrive through here.
        (b'{"a": 1e400}', None),
        (b'{"a": -1e400}', None),
        ('{"a": 1e400}', None),
        (r'{"a": "\ud800"}', {"a": "\ud800"}),  # an escaped surrogate is valid JSON text
        ('{"a": "\ud800"}', None),  # a raw lone surrogate cannot be encoded as UTF-8
        ('{"a": 1}'.encode("utf-16"), None),
        (b'\xef\xbb\xbf{"a": 1}', None),  # a byte-order mark is not JSON
        (b'{"a": ' * 65 + b"1" + b"}" * 65, None),  # nested deeper than 64 levels
    ],
)
def test_parse_event_body(raw, expected):
    assert parse_event_body(raw) == expected
