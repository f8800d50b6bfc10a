"""The attention reconciler on real PostgreSQL, in simulated time (no thread unless said)."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
import sqlalchemy as sa
from attention_support import (
    FakeClock,
    create_mr,
    default_rules,
    drain,
    members,
    reconciler,
    set_blocker,
    set_phase,
    wait_until,
)

from workqueue.attention import repository, writer
from workqueue.attention.config import QueueRule
from workqueue.attention.reconciler import CHANNEL, SIGNAL_INTERVAL_SECONDS, scope_lock_key


def test_startup_reconstructs_missing_memberships_once(sessions):
    with sessions() as session:
        failed_a = create_mr(session, "team/a", phase="failed")
        review_b = create_mr(session, "team/b", blocker="not_approved")
        conflict = create_mr(session, None, blocker="conflict")
        create_mr(session, "team/b")
        session.commit()
    clock = FakeClock()
    attention = reconciler(sessions, clock=clock)
    attention.apply_rules()
    drain(attention, clock)
    assert members(sessions, "needs-human") == {failed_a}
    assert members(sessions, "needs-review") == {review_b}
    assert members(sessions, "conflicts") == {conflict}
    # A second start finds nothing owed and writes nothing.
    again = reconciler(sessions, clock=clock)
    again.apply_rules()
    drain(again, clock)
    with sessions() as session:
        assert session.scalar(sa.text("SELECT count(*) FROM attention_memberships")) == 3


def test_a_change_in_one_project_never_touches_another(sessions):
    clock = FakeClock()
    attention = reconciler(sessions, clock=clock)
    attention.apply_rules()
    with sessions() as session:
        in_a = create_mr(session, "team/a")
        in_b = create_mr(session, "team/b")
        session.commit()
    drain(attention, clock)
    with sessions() as session:
        set_phase(session, in_a, "failed")
        set_phase(session, in_b, "failed")  # committed, but nobody signals team/b
        session.commit()
    attention.item_changed(in_a, "team/a")
    assert attention.board.pending() == {"team/a"}
    drain(attention, clock)
    assert members(sessions, "needs-human") == {in_a}
    attention.item_changed(in_b, "team/b")
    drain(attention, clock)
    assert members(sessions, "needs-human") == {in_a, in_b}


def test_prune_and_rule_disable(sessions):
    rules = [
        QueueRule(name="sticky", match={"phase": ["failed"]}),
        QueueRule(name="pruned", match={"phase": ["failed"]}, prune=True),
    ]
    clock = FakeClock()
    attention = reconciler(sessions, rules, clock=clock)
    attention.apply_rules()
    with sessions() as session:
        item = create_mr(session, "p", phase="failed")
        session.commit()
    attention.item_changed(item, "p")
    drain(attention, clock)
    assert members(sessions, "sticky") == members(sessions, "pruned") == {item}
    with sessions() as session:
        set_phase(session, item, "active")
        session.commit()
    attention.item_changed(item, "p")
    drain(attention, clock)
    assert members(sessions, "sticky") == {item}  # membership stays by default
    assert members(sessions, "pruned") == set()
    # Disabled, a rule adds nothing; enabled again, the next cycle catches up.
    disabled = [rules[0], rules[1].model_copy(update={"enabled": False})]
    attention.apply_rules(disabled)
    drain(attention, clock)
    with sessions() as session:
        set_phase(session, item, "failed")
        session.commit()
    attention.item_changed(item, "p")
    drain(attention, clock)
    assert members(sessions, "pruned") == set()
    attention.apply_rules(rules)
    drain(attention, clock)
    assert members(sessions, "pruned") == {item}


def test_pages_with_arrivals_during_the_cycle(sessions):
    clock = FakeClock()
    attention = reconciler(sessions, clock=clock)
    attention.apply_rules()
    with sessions() as session:
        first = [create_mr(session, "big", phase="failed") for _ in range(250)]
        session.commit()
    attention.signal("big")  # a whole cycle (as after a rule change)
    attention.run_due()  # first page of 100, cycle continues
    assert len(members(sessions, "needs-human")) == 100
    with sessions() as session:
        late = [create_mr(session, "big", phase="failed") for _ in range(30)]
        session.commit()
    for item in late:
        attention.item_changed(item, "big")
    passes = drain(attention, clock)
    assert members(sessions, "needs-human") == set(first) | set(late)
    # Finite: the first cycle stops at its upper id, one more cycle covers the arrivals.
    assert passes <= 3 + 3


def test_a_failing_row_lets_the_cycle_finish_and_is_retried(sessions):
    clock = FakeClock()
    with sessions() as session:
        items = [create_mr(session, "p", phase="failed") for _ in range(150)]
        session.commit()
    bad = sorted(items)[10]
    broken = {bad}

    def before_row(item_id: uuid.UUID) -> None:
        if item_id in broken:
            raise RuntimeError("detail reader broke")

    attention = reconciler(sessions, clock=clock, before_row=before_row)
    attention.apply_rules()
    for _ in range(4):
        attention.run_due()
        clock.advance(1.0)
    assert members(sessions, "needs-human") == set(items) - {bad}
    assert attention.board.failures("p") >= 1
    broken.clear()
    drain(attention, clock)
    assert members(sessions, "needs-human") == set(items)
    assert attention.board.pending() == set()


def test_persistently_failing_scope_backs_off_and_recovers(sessions):
    clock = FakeClock()
    attempts: list[float] = []
    failing = {"flaky"}

    def before_page(scope: str | None) -> None:
        if scope in failing:
            attempts.append(clock.now())
            raise RuntimeError("database says no")

    attention = reconciler(sessions, clock=clock, before_page=before_page)
    attention.apply_rules()
    with sessions() as session:
        item = create_mr(session, "flaky", phase="failed")
        other = create_mr(session, "healthy")
        session.commit()
    start = clock.now()
    for second in range(120):
        attention.item_changed(item, "flaky")  # a signal every second
        if second == 30:
            with sessions() as session:
                set_phase(session, other, "failed")
                session.commit()
            attention.item_changed(other, "healthy")
        attention.run_due()
        clock.advance(1.0)
    assert 1 <= len(attempts) <= 8, attempts
    assert clock.now() - start == 120
    assert members(sessions, "needs-human") == {other}  # other scopes went on meanwhile
    failing.clear()
    drain(attention, clock)
    assert members(sessions, "needs-human") == {item, other}
    assert attention.board.pending() == set()


def test_hand_removal_is_not_undone_until_the_item_changes(sessions):
    clock = FakeClock()
    attention = reconciler(sessions, clock=clock)
    attention.apply_rules()
    with sessions() as session:
        item = create_mr(session, "p", blocker="not_approved")
        session.commit()
    attention.item_changed(item, "p")
    drain(attention, clock)
    with sessions() as session:
        queue = repository.queue_by_name(session, "needs-review")
        assert queue is not None
        assert writer.remove_by_hand(session, attention.readers, queue, item, "alice")
        session.commit()
    attention.item_changed(item, "p")
    attention.wake_all()
    drain(attention, clock)
    assert members(sessions, "needs-review") == set()
    with sessions() as session:
        set_blocker(session, item, "requested_changes")
        session.commit()
    attention.item_changed(item, "p")
    drain(attention, clock)
    assert members(sessions, "needs-review") == {item}


def test_manual_add_and_reconciler_on_one_item_do_not_deadlock(sessions):
    """Queue row, then item, in both paths: the second waits, nobody deadlocks."""
    attention = reconciler(sessions, clock=FakeClock())
    attention.apply_rules()
    with sessions() as session:
        item = create_mr(session, "p", phase="failed")
        session.commit()
    manual = sessions()
    queue = repository.queue_by_name(manual, "needs-human")
    assert queue is not None
    assert writer.add_by_hand(manual, attention.readers, queue, item, "alice") is not None
    errors: list[BaseException] = []
    done = threading.Event()

    def reconcile() -> None:
        try:
            with sessions() as session:
                queues = [q.id for q in repository.served_queues(session)]
                writer.reconcile_items(session, attention.readers, queues, [item])
                session.commit()
        except BaseException as error:
            errors.append(error)
        finally:
            done.set()

    thread = threading.Thread(target=reconcile)
    thread.start()
    assert not done.wait(0.5)  # waiting for the manual transaction's item lock
    manual.commit()
    manual.close()
    thread.join(10)
    assert errors == []
    with sessions() as session:
        row = repository.membership_of(session, queue.id, item)
    assert row is not None
    assert row.added_by == "alice"


def test_a_claimed_scope_is_left_to_its_holder(sessions):
    clock = FakeClock()
    attention = reconciler(sessions, clock=clock)
    attention.apply_rules()
    with sessions() as session:
        item = create_mr(session, "p", phase="failed")
        session.commit()
    holder = sessions()
    holder.execute(
        sa.text("SELECT pg_advisory_xact_lock(:a, :b)"),
        {"a": 0x4154, "b": scope_lock_key("p")},
    )
    attention.item_changed(item, "p")
    attention.run_due()
    assert members(sessions, "needs-human") == set()
    assert attention.board.pending() == {"p"}  # kept, looked at again after 1 s
    holder.rollback()
    holder.close()
    drain(attention, clock)
    assert members(sessions, "needs-human") == {item}


def test_two_replicas_never_work_one_scope_at_once(sessions, conninfo):
    inside: dict[str | None, int] = {}
    overlaps: list[str | None] = []
    lock = threading.Lock()

    def before_page(scope: str | None) -> None:
        with lock:
            inside[scope] = inside.get(scope, 0) + 1
            if inside[scope] > 1:
                overlaps.append(scope)
        threading.Event().wait(0.01)
        with lock:
            inside[scope] -= 1

    replicas = [
        reconciler(sessions, listen_conninfo=conninfo, before_page=before_page) for _ in range(2)
    ]
    for replica in replicas:
        replica.start()
    try:
        with sessions() as session:
            items = [create_mr(session, f"p{index % 4}", phase="failed") for index in range(40)]
            session.commit()
        for index, item in enumerate(items):
            replicas[index % 2].item_changed(item, f"p{index % 4}")
        wait_until(lambda: members(sessions, "needs-human") == set(items), what="members")
        wait_until(lambda: all(not r.board.pending() for r in replicas), what="quiet")
    finally:
        for replica in replicas:
            replica.stop()
    assert overlaps == []


def test_a_change_committed_on_one_replica_is_served_by_another(sessions, conninfo):
    serving = reconciler(sessions, listen_conninfo=conninfo)
    serving.start()
    other = reconciler(sessions, listen_conninfo=conninfo, clock=FakeClock())
    try:
        assert serving.listening.wait(10)
        wait_until(lambda: not serving.board.pending(), what="startup")
        with sessions() as session:
            item = create_mr(session, "p", phase="failed")
            session.commit()
        other.item_changed(item, "p")
        other._send_signals()
        wait_until(lambda: members(sessions, "needs-human") == {item}, what="remote serve")
    finally:
        serving.stop()


def test_signals_to_other_replicas_coalesce_within_the_interval_and_none_is_lost(
    sessions, conninfo
):
    clock = FakeClock()
    sender = reconciler(sessions, listen_conninfo=conninfo, clock=clock)
    with psycopg.connect(conninfo, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")

        def heard() -> list[str]:
            # `<replica>|<item ids>|<scope>`: the scope, with the ids it names.
            found = []
            for notify in listener.notifies(timeout=1.0, stop_after=1):
                replica, ids, scope = notify.payload.split("|")
                assert replica == sender.replica
                found.append(f"{scope}:{ids}")
            return found

        items = {name: uuid.uuid4() for name in "abcd"}
        sender.item_changed(items["a"], "a")
        sender._send_signals()
        assert heard() == [f"pa:{items['a'].hex}"]
        sender.item_changed(items["b"], "b")
        sender.item_changed(items["c"], "c")
        sender._send_signals()  # within the interval: held back
        assert heard() == []
        clock.advance(SIGNAL_INTERVAL_SECONDS)
        sender._send_signals()
        assert sorted(heard() + heard()) == [f"pb:{items['b'].hex}", f"pc:{items['c'].hex}"]
        sender.item_changed(items["d"], "d")
        sender.stop()  # never started: what the interval held back goes now
        assert heard() == [f"pd:{items['d'].hex}"]


def test_shutdown_waits_for_the_row_in_flight_and_restart_finishes(sessions):
    with sessions() as session:
        items = sorted(create_mr(session, "p", phase="failed") for _ in range(20))
        session.commit()
    entered = threading.Event()
    release = threading.Event()
    seen: list[uuid.UUID] = []

    def before_row(item_id: uuid.UUID) -> None:
        seen.append(item_id)
        if len(seen) == 5:
            entered.set()
            release.wait(10)

    attention = reconciler(sessions, before_row=before_row)
    attention.start()
    assert entered.wait(10)
    stopper = threading.Thread(target=attention.stop)
    stopper.start()
    wait_until(lambda: attention.stopping, what="stopping")
    release.set()
    stopper.join(10)
    assert not stopper.is_alive()
    done = members(sessions, "needs-human")
    assert len(done) == 5  # the row in flight committed with the four before it
    restarted = reconciler(sessions, clock=FakeClock())
    restarted.apply_rules()
    drain(restarted, FakeClock())
    assert members(sessions, "needs-human") == set(items)


@pytest.mark.parametrize("rules", [default_rules()])
def test_audit_entries_for_every_change(sessions, rules, caplog):
    clock = FakeClock()
    caplog.set_level("INFO", logger="workqueue.audit")
    attention = reconciler(sessions, rules, clock=clock)
    attention.apply_rules()
    with sessions() as session:
        item = create_mr(session, "p", phase="failed")
        session.commit()
    attention.item_changed(item, "p")
    drain(attention, clock)
    assert any(
        "attention_added" in record.getMessage() and str(item) in record.getMessage()
        for record in caplog.records
    )


def test_a_changed_item_is_looked_at_alone_not_its_whole_project(sessions):
    """An item's change costs a look at that item: the project's other items, however
    many, are not read (they match too, but nothing said they changed)."""
    clock = FakeClock()
    attention = reconciler(sessions, clock=clock)
    attention.apply_rules()
    drain(attention, clock)
    with sessions() as session:
        others = [create_mr(session, "big", phase="failed") for _ in range(250)]
        changed = create_mr(session, "big", phase="failed")
        session.commit()
    read: list[uuid.UUID] = []
    attention.before_row = read.append

    attention.item_changed(changed, "big")
    passes = drain(attention, clock)

    assert passes == 1
    assert members(sessions, "needs-human") == {changed}
    assert read == [changed]
    # A whole cycle (a rule change, a reconnection) still finds the rest.
    attention.wake_all()
    drain(attention, clock)
    assert members(sessions, "needs-human") == {changed, *others}


def test_items_changed_during_a_whole_cycle_are_looked_at_after_it(sessions):
    clock = FakeClock()
    attention = reconciler(sessions, clock=clock)
    attention.apply_rules()
    with sessions() as session:
        items = sorted(create_mr(session, "p") for _ in range(150))
        session.commit()
    drain(attention, clock)
    attention.signal("p")
    attention.run_due()  # the first page of the cycle: items[:100] read as they were
    with sessions() as session:
        set_phase(session, items[0], "failed")  # already read by this cycle
        session.commit()
    attention.item_changed(items[0], "p")
    drain(attention, clock)
    assert members(sessions, "needs-human") == {items[0]}
    assert attention.board.pending() == set()


def test_a_failing_changed_item_is_retried_with_backoff_and_its_neighbours_go_on(sessions):
    clock = FakeClock()
    broken: set[uuid.UUID] = set()

    def before_row(item_id: uuid.UUID) -> None:
        if item_id in broken:
            raise RuntimeError("detail reader broke")

    attention = reconciler(sessions, clock=clock, before_row=before_row)
    attention.apply_rules()
    with sessions() as session:
        good, bad = (create_mr(session, "p", phase="failed") for _ in range(2))
        session.commit()
    drain(attention, clock)  # startup: both members
    with sessions() as session:
        session.execute(sa.text("DELETE FROM attention_memberships"))
        session.commit()
    broken.add(bad)
    attention.item_changed(good, "p")
    attention.item_changed(bad, "p")
    attention.run_due()
    assert members(sessions, "needs-human") == {good}
    assert attention.board.failures("p") == 1
    assert attention.board.pending() == {"p"}
    broken.clear()
    drain(attention, clock)
    assert members(sessions, "needs-human") == {good, bad}
    assert attention.board.pending() == set()


def test_a_signal_from_a_replica_of_an_earlier_version_wakes_the_whole_scope(sessions):
    clock = FakeClock()
    attention = reconciler(sessions, clock=clock)
    attention.apply_rules()
    drain(attention, clock)
    with sessions() as session:
        items = {create_mr(session, "p", phase="failed") for _ in range(3)}
        session.commit()
    attention._on_notify("elsewhere|pp")  # `<replica>|<scope>`: anything may have changed
    attention._on_notify("elsewhere|not-an-id|pp")  # malformed: ignored, logged
    drain(attention, clock)
    assert members(sessions, "needs-human") == items


def test_signals_for_long_project_paths_and_many_items_fit_notify_and_lose_nothing(
    sessions, conninfo
):
    """Payloads are cut by bytes (PostgreSQL refuses one of 8000 or more, and one refused
    payload would fail the statement sending them all): a 1,419-character path with 500
    changed items and a short project's one item all reach the other replicas."""
    long_scope = "/".join(f"group-{n:02d}-" + "x" * 62 for n in range(20))
    sender = reconciler(sessions, listen_conninfo=conninfo, clock=FakeClock())
    short_item = uuid.uuid4()
    long_items = {uuid.uuid4() for _ in range(500)}
    with psycopg.connect(conninfo, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        sender.item_changed(short_item, "acme/short")
        for item in long_items:
            sender.item_changed(item, long_scope)
        sender._send_signals(at_once=True)
        heard = [n.payload for n in listener.notifies(timeout=1.0, stop_after=50)]
    by_scope: dict[str, set[str]] = {}
    for payload in heard:
        assert len(payload.encode()) < 8000
        _replica, ids, scope = payload.split("|")
        by_scope.setdefault(scope, set()).update(ids.split(","))
    assert by_scope == {
        "pacme/short": {short_item.hex},
        f"p{long_scope}": {item.hex for item in long_items},
    }


def test_holds_and_red_pipelines_have_their_default_queues(sessions):
    with sessions() as session:
        parked = create_mr(session, "team/a", blocker="auto_merge_disabled")
        drafted = create_mr(session, "team/a", blocker="draft")
        red = create_mr(session, "team/a", blocker="pipeline_failed")
        waiting = create_mr(session, "team/a", blocker="pipeline_running")
        session.commit()
    clock = FakeClock()
    attention = reconciler(sessions, clock=clock)
    attention.apply_rules()
    drain(attention, clock)
    assert members(sessions, "held") == {parked, drafted}
    assert members(sessions, "red-ci") == {red}
    assert waiting not in members(sessions, "held") | members(sessions, "red-ci")
    # A person lifts the hold, CI is retried: both leave (the queues are pruned).
    with sessions() as session:
        set_blocker(session, parked, None)
        set_blocker(session, red, "pipeline_running")
        session.commit()
    attention.item_changed(parked, "team/a")
    attention.item_changed(red, "team/a")
    drain(attention, clock)
    assert members(sessions, "held") == {drafted}
    assert members(sessions, "red-ci") == set()
