"""Submitting MR items: validation first, then upsert by (project, source_branch)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
import sqlalchemy as sa

from workqueue.db.transactions import run_in_transaction
from workqueue.queue import Submitter
from workqueue.queue.holding_limits import HoldingLimitError, HoldingLimits
from workqueue.queue.models import Phase
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.submit import (
    OwnershipConflictError,
    SubmissionRejectedError,
    SubmitOutcome,
    submit_mr,
)

CONFIG = MRTypeConfig()
ROOMY = 1_000_000


def live_items(limit: int) -> HoldingLimits:
    return HoldingLimits(
        max_live_items_per_caller=limit,
        max_live_items_per_project=ROOMY,
        max_stored_bytes_per_caller=ROOMY,
    )


ISSUER = "https://issuer.example.com"


def submission(**overrides) -> MRWorkItemCreate:
    body = {
        "project": "group/sub/project",
        "source_branch": "workqueue/sync-kernel",
        "title": "Sync kernel sources",
        "commit_message": "Sync sources from upstream",
        "labels": ["bot"],
        "file_actions": [
            {"action": "update", "file_path": "kernel.spec", "content": "Version: 1\n"},
        ],
    }
    body.update(overrides)
    return MRWorkItemCreate.model_validate(body)


def submit(sessions, body: MRWorkItemCreate, caller: str = "system:serviceaccount:ns:bot"):
    return run_in_transaction(
        sessions,
        lambda session: submit_mr(
            session, body, submitter=Submitter(ISSUER, caller), config=CONFIG
        ),
        attempts=5,
    )


def rows(sessions, sql: str, **params):
    with sessions() as session:
        return session.execute(sa.text(sql), params).all()


def test_first_submission_creates_an_actionable_item(sessions):
    result = submit(sessions, submission())
    assert result.outcome is SubmitOutcome.CREATED
    item = result.item
    assert (item.phase, item.actionable, item.generation) == (Phase.ACTIVE, True, 1)
    assert item.idempotency_key == "mr:group/sub/project:workqueue/sync-kernel:1"
    assert item.caller_identity == "system:serviceaccount:ns:bot"
    assert item.content_hash.startswith("sha256:")
    (detail,) = rows(sessions, "SELECT title, labels, file_actions FROM mr_details")
    assert detail.title == "Sync kernel sources"
    assert detail.labels == ["bot"]
    assert detail.file_actions == [
        {
            "action": "update",
            "file_path": "kernel.spec",
            "content": "Version: 1\n",
            "encoding": "text",
        }
    ]


def test_same_content_again_is_unchanged_and_writes_nothing(sessions):
    first = submit(sessions, submission())
    before = rows(sessions, "SELECT updated_at, xmin::text FROM work_items")
    again = submit(sessions, submission())
    assert again.outcome is SubmitOutcome.UNCHANGED
    assert again.item.id == first.item.id
    assert rows(sessions, "SELECT updated_at, xmin::text FROM work_items") == before
    assert rows(sessions, "SELECT count(*) FROM work_item_statuses") == [(0,)]


def test_new_content_updates_the_live_item_and_asks_for_the_mr_again(sessions):
    first = submit(sessions, submission())
    with sessions() as session:
        session.execute(sa.text("UPDATE work_items SET actionable = false"))
        session.execute(
            sa.text(
                "INSERT INTO work_item_statuses (work_item_id, dimension, variant, status) "
                "VALUES (:id, 'needs_mr', '', 'false')"
            ),
            {"id": first.item.id},
        )
        session.commit()
    updated = submit(sessions, submission(title="Sync kernel sources (v2)"))
    assert updated.outcome is SubmitOutcome.UPDATED
    assert updated.item.id == first.item.id
    assert updated.item.actionable is True
    assert updated.item.content_hash != first.item.content_hash
    assert rows(sessions, "SELECT status FROM work_item_statuses") == [("true",)]
    assert rows(sessions, "SELECT title FROM mr_details") == [("Sync kernel sources (v2)",)]


def test_a_failed_item_is_retried_with_the_new_content(sessions):
    first = submit(sessions, submission())
    with sessions() as session:
        session.execute(
            sa.text(
                "UPDATE work_items SET phase = 'failed', attempts = 5, error = 'boom', "
                "actionable = false, next_attempt_at = now()"
            )
        )
        session.commit()
    retried = submit(sessions, submission())  # same content: failed items retry anyway
    assert retried.outcome is SubmitOutcome.RETRIED
    assert retried.item.id == first.item.id
    item = retried.item
    assert (item.phase, item.attempts, item.error, item.actionable) == (Phase.ACTIVE, 0, None, True)
    assert item.next_attempt_at is None


@pytest.mark.parametrize("terminal", ["completed", "cancelled"])
def test_after_a_terminal_item_a_new_generation_starts(sessions, terminal):
    first = submit(sessions, submission())
    with sessions() as session:
        session.execute(sa.text("UPDATE work_items SET phase = :phase"), {"phase": terminal})
        session.commit()
    second = submit(sessions, submission())
    assert second.outcome is SubmitOutcome.CREATED
    assert second.item.id != first.item.id
    assert second.item.generation == 2
    assert second.item.idempotency_key == "mr:group/sub/project:workqueue/sync-kernel:2"
    assert rows(sessions, "SELECT phase, generation FROM work_items ORDER BY generation") == [
        (terminal, 1),
        ("active", 2),
    ]


def test_identity_is_project_and_branch_exactly_as_given(sessions):
    submit(sessions, submission())
    other_branch = submit(sessions, submission(source_branch="workqueue/other"))
    numeric_project = submit(sessions, submission(project="1234"))
    assert other_branch.outcome is numeric_project.outcome is SubmitOutcome.CREATED
    assert rows(sessions, "SELECT count(*) FROM work_items") == [(3,)]


def test_policy_violations_store_nothing(sessions):
    blocked = submission(
        file_actions=[{"action": "delete", "file_path": ".gitlab-ci.yml"}],
    )
    with pytest.raises(SubmissionRejectedError) as caught:
        submit(sessions, blocked)
    assert [violation.loc for violation in caught.value.violations] == [
        ("body", "file_actions", 0, "file_path")
    ]
    assert rows(sessions, "SELECT count(*) FROM work_items") == [(0,)]


def _race(sessions, bodies) -> Counter:
    outcomes: Counter = Counter()
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(bodies))

    def one(body) -> None:
        barrier.wait()
        try:
            outcomes[submit(sessions, body).outcome] += 1
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=one, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return outcomes


def test_twenty_concurrent_identical_submissions_make_one_item(sessions):
    outcomes = _race(sessions, [submission()] * 20)
    assert outcomes == {SubmitOutcome.CREATED: 1, SubmitOutcome.UNCHANGED: 19}
    assert rows(sessions, "SELECT count(*) FROM work_items") == [(1,)]


def test_twenty_concurrent_different_submissions_still_make_one_item(sessions):
    bodies = [submission(title=f"Sync {n}") for n in range(20)]
    outcomes = _race(sessions, bodies)
    assert outcomes[SubmitOutcome.CREATED] == 1
    assert outcomes[SubmitOutcome.UPDATED] + outcomes[SubmitOutcome.UNCHANGED] == 19
    assert rows(sessions, "SELECT count(*) FROM work_items") == [(1,)]


# -- ownership, live items, limits -------------------------------------------------------


def item_rows(sessions):
    return rows(
        sessions,
        "SELECT id, caller_issuer, caller_identity, updated_at, xmin::text, live_key "
        "FROM work_items ORDER BY created_at",
    )


def test_another_callers_submission_for_a_live_branch_changes_nothing(sessions):
    submit(sessions, submission())
    before = item_rows(sessions)
    with pytest.raises(OwnershipConflictError, match="belongs to another caller"):
        submit(sessions, submission(title="Taken over"), caller="system:serviceaccount:ns:evil")
    assert item_rows(sessions) == before


def test_the_same_subject_from_another_issuer_is_another_caller(sessions):
    submit(sessions, submission())
    before = item_rows(sessions)

    def from_other_issuer(session):
        submitter = Submitter("https://other-issuer.example.com", "system:serviceaccount:ns:bot")
        return submit_mr(session, submission(title="x"), submitter=submitter, config=CONFIG)

    with pytest.raises(OwnershipConflictError):
        run_in_transaction(sessions, from_other_issuer)
    assert item_rows(sessions) == before


def test_the_owner_and_issuer_are_recorded_with_the_live_key(sessions):
    created = submit(sessions, submission())
    [(_, issuer, identity, _, _, live_key)] = item_rows(sessions)
    assert (issuer, identity) == (ISSUER, "system:serviceaccount:ns:bot")
    assert live_key == "mr:group/sub/project:workqueue/sync-kernel"
    assert created.item.project_path == "group/sub/project"


def test_the_database_refuses_a_second_live_item_for_one_branch(sessions):
    """The partial unique index on live_key holds even without the advisory lock."""
    submit(sessions, submission())
    with (
        sessions() as session,
        pytest.raises(sa.exc.IntegrityError, match="uq_work_items_live_key"),
    ):
        session.execute(
            sa.text(
                "INSERT INTO work_items (item_type, caller_identity, generation, live_key) "
                "VALUES ('mr', 'x', 2, 'mr:group/sub/project:workqueue/sync-kernel')"
            )
        )
    with sessions() as session:
        # Once the first is terminal, the key is free for a new generation.
        session.execute(sa.text("UPDATE work_items SET phase = 'completed'"))
        session.execute(
            sa.text(
                "INSERT INTO work_items (item_type, caller_identity, generation, live_key) "
                "VALUES ('mr', 'x', 2, 'mr:group/sub/project:workqueue/sync-kernel')"
            )
        )
        session.commit()


def test_a_caller_at_its_live_item_limit_cannot_create_but_can_update(sessions):
    def submit_limited(body):
        return run_in_transaction(
            sessions,
            lambda session: submit_mr(
                session,
                body,
                submitter=Submitter(ISSUER, "bot"),
                config=CONFIG,
                limits=live_items(2),
            ),
        )

    submit_limited(submission(source_branch="workqueue/a"))
    submit_limited(submission(source_branch="workqueue/b"))
    with pytest.raises(HoldingLimitError, match=r"^max_live_items_per_caller \(2\) reached"):
        submit_limited(submission(source_branch="workqueue/c"))
    assert submit_limited(submission(source_branch="workqueue/a", title="v2")).outcome is (
        SubmitOutcome.UPDATED
    )
    assert rows(sessions, "SELECT count(*) FROM work_items") == [(2,)]


def test_concurrent_creations_never_exceed_the_live_item_limit(sessions):
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def one(branch: str) -> None:
        try:
            run_in_transaction(
                sessions,
                lambda session: submit_mr(
                    session,
                    submission(source_branch=branch),
                    submitter=Submitter(ISSUER, "bot"),
                    config=CONFIG,
                    limits=live_items(3),
                ),
                attempts=5,
            )
            result = "created"
        except HoldingLimitError:
            result = "limited"
        with lock:
            outcomes[result] += 1

    threads = [threading.Thread(target=one, args=(f"workqueue/t{n}",)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == {"created": 3, "limited": 9}
    assert rows(sessions, "SELECT count(*) FROM work_items") == [(3,)]
