"""The delivery intake (`queue.intake`, `queue.intake_loop`): stored first, resolved behind
the answer in batches, crash-safe, exactly once per distinct delivery (sample type)."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa
from sample_type import SAMPLE_TYPE, Behaviour, build_registry, create_item
from webhook_support import OLD_SECRET, resolved, webhook_app

from workqueue.db.transactions import run_in_transaction
from workqueue.queue.intake import deliveries as intake
from workqueue.queue.intake.resolver import IntakeResolver


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


def store(sessions, registry, *, key, targets=(), event_type="poke", raw=None):
    body = {"targets": [str(t) for t in targets]}
    return run_in_transaction(
        sessions,
        lambda session: intake.store_delivery(
            session,
            registry,
            source="webhook",
            delivery_key=key,
            event_type=event_type,
            body=body,
            raw_body=raw,
        ),
    )


def table(sessions, sql):
    with sessions() as session:
        return [tuple(row) for row in session.execute(sa.text(sql)).all()]


def events(sessions):
    return sorted(table(sessions, "SELECT work_item_id, dedupe_key FROM pending_events"))


def waiting(sessions):
    return table(sessions, "SELECT delivery_key FROM incoming_deliveries ORDER BY id")


@pytest.fixture
def woken() -> list[uuid.UUID]:
    return []


@pytest.fixture
def resolver(sessions, registry, woken) -> Iterator[IntakeResolver]:
    """Not started: tests drive `resolve_waiting` themselves."""
    resolver = IntakeResolver(
        sessions=sessions,
        registry=registry,
        on_items=woken.extend,
        sweep_seconds=3600,
        batch_size=2,
    )
    yield resolver
    resolver.stop(timeout=5)


def test_storing_records_the_key_and_the_body_and_resolves_nothing(sessions, registry, items):
    assert store(sessions, registry, key="d-1", targets=items[:2]) == "accepted"
    assert store(sessions, registry, key="d-1", targets=items) == "duplicate"
    assert store(sessions, registry, key="d-2", event_type="unrouted") == "ignored"

    assert waiting(sessions) == [("d-1",)]
    assert table(sessions, "SELECT delivery_key, event_type FROM received_deliveries") == [
        ("d-1", "poke")
    ]
    assert events(sessions) == []
    assert table(sessions, "SELECT id FROM work_items WHERE actionable") == []


def test_resolution_stores_each_delivery_once_in_batches_and_wakes_the_items(
    sessions, registry, items, resolver, woken
):
    for n in range(5):  # batches of 2: three transactions
        store(sessions, registry, key=f"d-{n}", targets=[items[n % 3]])

    assert resolver.resolve_waiting() == 5

    assert waiting(sessions) == []
    assert events(sessions) == sorted((items[n % 3], f"d-{n}:{items[n % 3]}") for n in range(5))
    assert sorted(woken) == sorted(items[n % 3] for n in range(5))
    assert sorted(table(sessions, "SELECT id FROM work_items WHERE actionable")) == sorted(
        (item,) for item in items
    )
    assert resolver.resolve_waiting() == 0


def test_a_delivery_for_no_item_is_resolved_to_nothing(sessions, registry, items, resolver):
    store(sessions, registry, key="d-1", targets=[uuid.uuid4()])

    assert resolver.resolve_waiting() == 1
    assert (waiting(sessions), events(sessions)) == ([], [])


def test_deliveries_a_dead_replica_held_are_resolved_by_another(
    sessions, registry, items, resolver
):
    for n in range(3):
        store(sessions, registry, key=f"d-{n}", targets=[items[n]])
    dying = sessions()
    assert [d.delivery_key for d in intake.claim(dying, 10)] == ["d-0", "d-1", "d-2"]

    # Held by the other replica's open transaction: skipped, not waited for.
    assert resolver.resolve_waiting() == 0
    pid = dying.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
    with sessions() as session:
        session.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    with contextlib.suppress(sa.exc.OperationalError):  # its connection is gone
        dying.close()

    assert resolver.resolve_waiting() == 3
    assert events(sessions) == sorted((items[n], f"d-{n}:{items[n]}") for n in range(3))


def test_two_resolvers_apply_every_delivery_exactly_once(sessions, registry, items):
    count = 60
    for n in range(count):
        store(sessions, registry, key=f"d-{n}", targets=items)
    resolvers = [
        IntakeResolver(
            sessions=sessions, registry=registry, on_items=lambda _ids: None, sweep_seconds=3600
        )
        for _ in range(2)
    ]
    totals: list[int] = []
    threads = [
        threading.Thread(target=lambda r=r: totals.append(r.resolve_waiting())) for r in resolvers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sum(totals) == count
    assert waiting(sessions) == []
    assert events(sessions) == sorted(
        (item, f"d-{n}:{item}") for n in range(count) for item in items
    )


def test_a_delivery_that_cannot_be_resolved_costs_only_itself(
    sessions, registry, items, resolver, caplog
):
    registration = registry.get(SAMPLE_TYPE)

    def resolve_or_fail(session, body):
        if body.get("poison"):
            raise RuntimeError("resolver bug")
        return resolve_targets(session, body)

    registration.resolvers["poke"] = resolve_or_fail
    store(sessions, registry, key="good-1", targets=[items[0]])
    run_in_transaction(
        sessions,
        lambda session: intake.store_delivery(
            session,
            registry,
            source="webhook",
            delivery_key="poison",
            event_type="poke",
            body={"poison": True},
        ),
    )
    store(sessions, registry, key="good-2", targets=[items[1]])

    assert resolver.resolve_waiting() == 2

    assert events(sessions) == sorted(
        [(items[0], f"good-1:{items[0]}"), (items[1], f"good-2:{items[1]}")]
    )
    assert waiting(sessions) == []  # the poisoned one was dropped, with an error logged
    assert "delivery" in caplog.text
    assert "dropped" in caplog.text


def test_a_raw_body_is_stored_as_sent_unless_jsonb_would_refuse_it(sessions, registry, items):
    raw = b'{"targets": [], "note": "caf\\u00e9 <b>", "n": 10000000000000000000001}'
    store(sessions, registry, key="raw", raw=raw)
    refused = b'{"targets": [], "note": "a\\u0000b\\ud800c"}'
    run_in_transaction(
        sessions,
        lambda session: intake.store_delivery(
            session,
            registry,
            source="webhook",
            delivery_key="nul",
            event_type="poke",
            body={"targets": [], "note": "a\x00b\ud800c"},
            raw_body=refused,
        ),
    )

    stored = dict(table(sessions, "SELECT delivery_key, body FROM incoming_deliveries"))
    assert stored["raw"] == {"targets": [], "note": "café <b>", "n": 10000000000000000000001}
    assert stored["nul"] == {"targets": [], "note": "ab?c"}


def test_an_idle_resolver_sends_no_sql_between_sweeps(sessions, registry, items):
    opened: list[int] = []

    def counting_sessions():
        opened.append(1)
        return sessions()

    resolver = IntakeResolver(
        sessions=counting_sessions,  # type: ignore[arg-type]
        registry=registry,
        on_items=lambda _ids: None,
        sweep_seconds=3600,
    )
    resolver.start()
    try:
        resolved(sessions)  # the catch-up round at start
        first = threading.Event()
        first.wait(0.3)
        at_rest = len(opened)
        first.wait(0.5)
        assert len(opened) == at_rest == 1  # the catch-up round only
        store(sessions, registry, key="d-1", targets=[items[0]])
        resolver.wake()
        resolved(sessions)
        assert events(sessions) == [(items[0], f"d-1:{items[0]}")]
    finally:
        resolver.stop(timeout=5)


def test_a_delivery_stored_here_is_resolved_in_one_round(sessions, registry, items, conninfo):
    """Listening, the resolver is woken by the delivery's own NOTIFY, not a second time by
    the receiver; without a listener the receiver's wake-up is what resolves it."""
    opened: list[int] = []

    def counting_sessions():
        opened.append(1)
        return sessions()

    listening = IntakeResolver(
        sessions=counting_sessions,  # type: ignore[arg-type]
        registry=registry,
        on_items=lambda _ids: None,
        sweep_seconds=3600,
        listen_conninfo=conninfo,
    )
    listening.start()
    try:
        assert listening.listening.wait(10)
        resolved(sessions)  # the catch-up rounds at start and on connection
        threading.Event().wait(0.3)
        for n in range(3):
            before = len(opened)
            store(sessions, registry, key=f"l-{n}", targets=[items[n]])
            listening.stored_here()
            resolved(sessions)
            threading.Event().wait(0.3)  # room for a second round, if one came
            assert len(opened) - before == 1
    finally:
        listening.stop(timeout=5)

    alone = IntakeResolver(
        sessions=sessions, registry=registry, on_items=lambda _ids: None, sweep_seconds=3600
    )
    alone.start()
    try:
        resolved(sessions)
        store(sessions, registry, key="alone", targets=[items[0]])
        alone.stored_here()
        resolved(sessions)
    finally:
        alone.stop(timeout=5)
    assert len(events(sessions)) == 4


def test_the_webhook_answer_does_not_wait_for_resolution(database_url, simulator, world):
    """A resolver blocked behind the answer: the 200 comes, the event follows its release."""
    with webhook_app(database_url, simulator.url) as service:
        registration = service.runtime.registry.get("mr")
        real = registration.resolvers["note"]
        release = threading.Event()
        entered = threading.Event()

        def slow(session, body):
            entered.set()
            release.wait(30)
            return real(session, body)

        registration.resolvers["note"] = slow
        # Without its many-bodies form the engine applies `slow` to each body.
        registration.many_resolvers.pop("note")
        hook = simulator.note_hook(world.note_id)
        try:
            first = simulator.send_webhook(service.url, hook, secret_token=OLD_SECRET)
            assert entered.wait(10)  # the resolver is now holding its batch
            second = httpx.post(
                service.url,
                json=hook,
                headers={"X-Gitlab-Token": OLD_SECRET, "Idempotency-Key": "while-blocked"},
                timeout=10,
            )
            assert first.json() == {"status": "accepted"}
            assert second.json() == {"status": "accepted"}
        finally:
            release.set()
        resolved(service.runtime.sessions)


def test_many_deliveries_in_one_statement_keep_the_first_of_each_key(sessions, registry, items):
    store(sessions, registry, key="seen", targets=[items[0]])
    deliveries = [
        intake.new_delivery(
            source="webhook",
            delivery_key=key,
            event_type="poke",
            body={"targets": [str(items[n % 3])], "n": n},
        )
        for n, key in enumerate(["a", "seen", "a", None, "b", None])
    ]

    statuses = run_in_transaction(
        sessions, lambda session: intake.store_deliveries(session, deliveries)
    )

    assert statuses == ["accepted", "duplicate", "duplicate", "accepted", "accepted", "accepted"]
    stored = table(
        sessions, "SELECT delivery_key, body ->> 'n' FROM incoming_deliveries ORDER BY id"
    )
    assert stored == [("seen", None), ("a", "0"), (None, "3"), ("b", "4"), (None, "5")]


def test_awkward_keys_and_bodies_survive_the_batch_statement(sessions, registry, items):
    """The batch goes as array literals: quotes, backslashes, braces, commas, NULL-looking
    keys and non-ASCII text come back as sent, raw bodies included."""
    awkward = ['"', "\\", "{a,b}", "NULL", "null", " x ", "café ✓", 'a\\"b', "", "\t\n"]
    raw = b'{"targets": [], "s": "q\\"u\\\\o{t,e}", "u": "\\u00e9\\n"}'
    deliveries = [
        intake.new_delivery(
            source=f"webhook{text}",
            delivery_key=f"k{n}{text}",
            event_type="poke",
            body={"targets": [], "text": text, "nested": {text: [text]}},
        )
        for n, text in enumerate(awkward)
    ]
    deliveries.append(
        intake.new_delivery(
            source="webhook",
            delivery_key="raw",
            event_type="poke",
            body={"targets": [], "s": 'q"u\\o{t,e}', "u": "é\n"},
            raw_body=raw,
        )
    )

    statuses = run_in_transaction(
        sessions, lambda session: intake.store_deliveries(session, deliveries)
    )

    assert statuses == ["accepted"] * len(deliveries)
    stored = table(
        sessions, "SELECT delivery_key, source, body FROM incoming_deliveries ORDER BY id"
    )
    assert stored[:-1] == [
        (f"k{n}{text}", f"webhook{text}", {"targets": [], "text": text, "nested": {text: [text]}})
        for n, text in enumerate(awkward)
    ]
    assert stored[-1] == ("raw", "webhook", {"targets": [], "s": 'q"u\\o{t,e}', "u": "é\n"})


def test_concurrent_webhooks_are_stored_together_and_each_answered(database_url, simulator, world):
    """Forty requests at once, ten of them repeating another's key: one answer each."""
    with webhook_app(database_url, simulator.url) as service:
        hook = simulator.note_hook(world.note_id)
        keys = [f"k-{n % 30}" for n in range(40)]
        answers: dict[int, str] = {}

        def send(n: int) -> None:
            answer = httpx.post(
                service.url,
                json=hook,
                headers={"X-Gitlab-Token": OLD_SECRET, "Idempotency-Key": keys[n]},
                timeout=30,
            )
            answers[n] = answer.json()["status"]

        threads = [threading.Thread(target=send, args=(n,)) for n in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        resolved(service.runtime.sessions)
        recorded = table(service.runtime.sessions, "SELECT delivery_key FROM received_deliveries")

    assert sorted(answers.values()) == ["accepted"] * 30 + ["duplicate"] * 10
    assert sorted(key for (key,) in recorded) == sorted(set(keys))


def test_a_batch_resolves_in_arrival_order_around_deliveries_that_make_items(
    sessions, registry, items, woken
):
    """Deliveries no creator handles are looked up together, but a delivery that makes
    an item splits them: the ones before it do not reach the new item, the ones after do,
    as if each had been resolved alone."""
    registration = registry.get(SAMPLE_TYPE)

    def every_active_item(session, body):
        del body
        rows = session.execute(sa.text("SELECT id FROM work_items WHERE phase = 'active'"))
        return [row.id for row in rows]

    lookups = []

    def every_active_item_of_many(session, bodies):
        lookups.append(len(bodies))
        return [every_active_item(session, body) for body in bodies]

    def make_one(session, body):
        del body
        return [create_item(session, [], notify=False)]

    registration.add_resolver("ping", every_active_item, many=every_active_item_of_many)
    registration.add_creator("make", make_one)
    for key, event_type in [("p-1", "ping"), ("p-2", "ping"), ("m-1", "make"), ("p-3", "ping")]:
        store(sessions, registry, key=key, event_type=event_type)
    resolver = IntakeResolver(
        sessions=sessions, registry=registry, on_items=woken.extend, sweep_seconds=3600
    )
    try:
        assert resolver.resolve_waiting() == 4
    finally:
        resolver.stop(timeout=5)

    created = set(woken) - set(items)
    assert len(created) == 1
    keys_by_item: dict[uuid.UUID, set[str]] = {}
    for item_id, dedupe_key in events(sessions):
        keys_by_item.setdefault(item_id, set()).add(dedupe_key.split(":")[0])
    assert keys_by_item == {
        **{item_id: {"p-1", "p-2", "p-3"} for item_id in items},
        **{item_id: {"p-3"} for item_id in created},
    }
    assert lookups == [2, 1]  # the run before the creator, then the one after
