"""The per-item loop on a real database: success, failure, retry, deferral, handled types."""

from __future__ import annotations

import time

from harness import dimension_rows, fast_config, item_row, running_manager, settled, wait_until
from sample_type import Behaviour, build_registry, create_item, executions

from workqueue.queue.models import Phase


def test_success_path_runs_every_step_once_and_goes_idle(sessions):
    behaviour = Behaviour()
    with running_manager(sessions, build_registry(behaviour)) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a", "b", "finish"])
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: settled(sessions), what="the item to settle")

    row = item_row(sessions, item_id)
    assert row.phase == Phase.COMPLETED
    assert (row.actionable, row.attempts, row.error) == (False, 0, None)
    assert (row.leased_until, row.lease_token) == (None, None)
    with sessions() as session:
        assert [(v, w) for _, v, w in executions(session)] == [
            ("a", "main"),
            ("b", "main"),
            ("finish", "main"),
        ]
    assert {v: r.status for v, r in dimension_rows(sessions, item_id).items()} == {
        "a": "false",
        "b": "false",
        "finish": "false",
    }


def test_failures_back_off_then_fail_the_item_after_max_attempts(sessions):
    behaviour = Behaviour(failures={"a": 99})
    config = fast_config(max_attempts=3, backoff_initial_seconds=0.1, backoff_max_seconds=0.3)
    with running_manager(sessions, build_registry(behaviour), config) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a"])
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: item_row(sessions, item_id).phase == Phase.FAILED, what="failure")

    row = item_row(sessions, item_id)
    assert row.attempts == 3
    assert row.error == "RuntimeError: transient trouble in step a"
    assert row.actionable is False
    assert row.next_attempt_at is None
    assert behaviour.calls[(item_id, "a")] == 3
    with sessions() as session:
        assert executions(session) == []


def test_backoff_delays_the_next_attempt(sessions):
    behaviour = Behaviour(failures={"a": 1})
    config = fast_config(backoff_initial_seconds=1.0, backoff_max_seconds=5)
    with running_manager(sessions, build_registry(behaviour), config) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a"])
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: item_row(sessions, item_id).attempts == 1, what="first failure")
        failed = item_row(sessions, item_id)
        assert failed.actionable is True
        assert failed.next_attempt_at is not None
        # The backoff (1 s) counts from the failure's statement, `updated_at`
        # from its transaction's start: the gap is the backoff plus however
        # long that transaction had run (milliseconds, more on a loaded
        # machine), and well short of a second failure's 2 s.
        assert 1.0 <= (failed.next_attempt_at - failed.updated_at).total_seconds() < 2.0
        # The timer, not a sweep (300 s), brings it back after the backoff.
        wait_until(lambda: settled(sessions), timeout=10, what="retry after backoff")
    assert item_row(sessions, item_id).attempts == 0


def test_a_failure_asking_to_wait_is_retried_no_sooner_than_it_asked(sessions):
    # A server's Retry-After (carried as `retry_after`) outweighs a shorter backoff.
    behaviour = Behaviour(failures={"a": 1}, retry_after=3.0)
    config = fast_config(backoff_initial_seconds=0.1, backoff_max_seconds=0.2)
    with running_manager(sessions, build_registry(behaviour), config) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a"])
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: item_row(sessions, item_id).attempts == 1, what="first failure")
        failed = item_row(sessions, item_id)
        # The wait counts from the failure (clock_timestamp), updated_at from the
        # transaction's start (now()): a busy machine puts milliseconds between them.
        # Retry-After plus the backoff on top would be 3.1.
        assert 2.9 < (failed.next_attempt_at - failed.updated_at).total_seconds() < 3.1
        wait_until(lambda: settled(sessions), timeout=15, what="retry after Retry-After")
    assert item_row(sessions, item_id).attempts == 0
    assert behaviour.calls[(item_id, "a")] == 2


def test_a_success_resets_attempts_and_error(sessions):
    behaviour = Behaviour(failures={"a": 2})
    with running_manager(sessions, build_registry(behaviour)) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a", "b"])
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: settled(sessions), what="the item to settle")
    row = item_row(sessions, item_id)
    assert (row.phase, row.attempts, row.error) == (Phase.ACTIVE, 0, None)
    assert behaviour.calls[(item_id, "a")] == 3
    assert behaviour.calls[(item_id, "b")] == 1


def test_permanent_error_fails_at_once_with_its_message(sessions):
    behaviour = Behaviour(permanent={"a"})
    with running_manager(sessions, build_registry(behaviour)) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a"])
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: item_row(sessions, item_id).phase == Phase.FAILED, what="failure")
    row = item_row(sessions, item_id)
    assert row.attempts == 1
    assert row.error == "refused: step a can never work"
    assert behaviour.calls[(item_id, "a")] == 1


def test_deferral_costs_no_attempt_and_wakes_when_due(sessions):
    behaviour = Behaviour(defer_once={"a": 0.5})
    with running_manager(sessions, build_registry(behaviour)) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a"])
            session.commit()
        manager.notify(item_id)
        wait_until(lambda: behaviour.calls[(item_id, "a")] == 1, what="first call")
        wait_until(
            lambda: (
                dimension_rows(sessions, item_id)["a"].pending_until is not None
                or behaviour.calls[(item_id, "a")] == 2
            ),
            what="deferral recorded",
        )
        deferred = item_row(sessions, item_id)
        assert deferred.attempts == 0
        wait_until(lambda: behaviour.calls[(item_id, "a")] == 2, timeout=10, what="re-run")
        wait_until(lambda: settled(sessions), what="the item to settle")
    assert item_row(sessions, item_id).attempts == 0
    assert dimension_rows(sessions, item_id)["a"].status == "false"


def test_replica_claims_only_the_types_it_handles(sessions):
    behaviour = Behaviour()
    with running_manager(sessions, build_registry(behaviour), handled_types=("other",)) as mgr:
        with sessions() as session:
            sample_id = create_item(session, ["a"])
            other_id = create_item(session, ["a"], item_type="other")
            session.commit()
        mgr.notify(sample_id)
        mgr.notify(other_id)
        wait_until(lambda: not item_row(sessions, other_id).actionable, what="other done")
        time.sleep(0.3)
    assert item_row(sessions, sample_id).actionable is True
    assert behaviour.calls[(sample_id, "a")] == 0


def test_empty_handled_types_processes_nothing(sessions):
    behaviour = Behaviour()
    with running_manager(sessions, build_registry(behaviour), handled_types=()) as manager:
        with sessions() as session:
            item_id = create_item(session, ["a"])
            session.commit()
        manager.notify(item_id)
        manager.sweep()
        time.sleep(0.5)
    assert item_row(sessions, item_id).actionable is True
    assert behaviour.calls == {}
