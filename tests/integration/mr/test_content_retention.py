"""Retention of contents: the safety sweep empties old finished items (file contents,
description, commit message), batch by batch, idempotently, with several replicas at
once, and nothing later pushes what is gone."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from itertools import count

import pytest
import sqlalchemy as sa
from harness import fast_config, running_manager, wait_until
from mr_harness import body, mr_registry, submit

from workqueue.api.schemas import listed_item_body
from workqueue.db.transactions import run_in_transaction
from workqueue.queue import Submitter, ownership_repository
from workqueue.queue.models import WorkItem
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.queue.retention.contents import drop_finished_contents
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.submit import SubmitOutcome, submit_mr
from workqueue.types.mr.validation.stored_bytes import bytes_kept

WEEK = timedelta(days=7)
FILE_ACTIONS = [
    {"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"},
    {"action": "create", "file_path": "hello.txt", "content": "aGkK", "encoding": "base64"},
    {"action": "create", "file_path": "empty.txt", "content": ""},
    {"action": "move", "file_path": "b.patch", "previous_path": "patches/keep.patch"},
    {"action": "delete", "file_path": "README.md"},
    {"action": "chmod", "file_path": "tools/run.sh", "execute_filemode": True},
]
# What `create` stores (`mr_harness.body`), in UTF-8 bytes: the title, labels and file
# paths retention keeps, and the description, commit message and contents it drops.
PATHS = ("kernel.spec", "hello.txt", "empty.txt", "b.patch", "patches/keep.patch")
KEPT_BYTES = (
    len("Sync kernel sources")
    + len("bot")
    + len("sync")
    + sum(len(path) for path in (*PATHS, "README.md", "tools/run.sh"))
)
DROPPED_BYTES = len("Automated sync") + len("Sync sources from upstream") + len("Version: 2\naGkK")


@pytest.fixture
def registry(simulator):
    return mr_registry(simulator)


_branches = count()


def create(sessions, registry, *, phase: str = "cancelled", days_ago: float = 8) -> uuid.UUID:
    """An item in `phase` whose last change was `days_ago`."""
    submission = body(source_branch=f"workqueue/r{next(_branches)}", file_actions=FILE_ACTIONS)
    item_id = submit(sessions, registry, submission).item.id
    with sessions() as session:
        session.execute(
            sa.text(
                "UPDATE work_items SET phase = :phase, actionable = false, "
                "updated_at = now() - make_interval(secs => :seconds) WHERE id = :id"
            ),
            {"phase": phase, "seconds": days_ago * 86400, "id": item_id},
        )
        session.commit()
    return item_id


def state(sessions, item_id):
    with sessions() as session:
        return session.execute(
            sa.text(
                "SELECT w.content_bytes, w.contents_dropped_at, w.updated_at, d.file_actions, "
                "d.title, d.description, d.commit_message, d.labels "
                "FROM work_items w JOIN mr_details d USING (id) WHERE w.id = :id"
            ),
            {"id": item_id},
        ).one()


def listed_actions(sessions, item_id):
    with sessions() as session:
        item = session.get(WorkItem, item_id)
        return listed_item_body(item, []).details["file_actions"]


def test_old_finished_items_lose_their_contents_and_keep_size_and_sha256(sessions, registry):
    finished = {
        phase: create(sessions, registry, phase=phase)
        for phase in ("completed", "failed", "cancelled")
    }
    recent = create(sessions, registry, days_ago=6)
    live = create(sessions, registry, phase="active")
    before = {item_id: listed_actions(sessions, item_id) for item_id in finished.values()}
    assert state(sessions, recent).content_bytes == KEPT_BYTES + DROPPED_BYTES

    assert drop_finished_contents(sessions, registry, age=WEEK) == 3

    for item_id in finished.values():
        row = state(sessions, item_id)
        assert row.content_bytes == KEPT_BYTES
        assert row.contents_dropped_at is not None
        # The texts GitLab holds on the MR and the commit go too; the title and labels stay.
        assert (row.description, row.commit_message) == (None, "")
        assert (row.title, row.labels) == ("Sync kernel sources", ["bot", "sync"])
        # What lists computed from the contents, now stored in their place.
        assert row.file_actions == before[item_id]
        assert all("content" not in action for action in row.file_actions)
        assert [a["size"] for a in row.file_actions] == [11, 3, 0, None, None, None]
        assert listed_actions(sessions, item_id) == before[item_id]
    for item_id in (recent, live):
        row = state(sessions, item_id)
        assert row.contents_dropped_at is None
        assert row.file_actions[0]["content"] == "Version: 2\n"
        assert row.description == "Automated sync"


def test_what_an_emptied_item_counts_is_what_its_submission_keeps(sessions, registry):
    """The SQL of the drop and the Python of the submission count the same bytes."""
    submission = body(
        source_branch="workqueue/unicode",
        title="Mise à jour 😀",
        description="Beschreibung: süß " * 50,
        commit_message="Übernahme € from upstream",
        labels=["bot", "süß", "bot"],
        package="kernel-é",
        change_kind="sync",
        file_actions=[
            {"action": "update", "file_path": "docs/é.txt", "content": "€\n"},
            {"action": "move", "file_path": "new/ü", "previous_path": "old/ü", "content": "x"},
            {"action": "delete", "file_path": "gone/😀.md"},
        ],
    )
    item_id = submit(sessions, registry, submission).item.id
    with sessions() as session:
        session.execute(
            sa.text(
                "UPDATE work_items SET phase = 'completed', actionable = false, "
                "updated_at = now() - interval '8 days' WHERE id = :id"
            ),
            {"id": item_id},
        )
        session.commit()
    assert drop_finished_contents(sessions, registry, age=WEEK) == 1
    assert state(sessions, item_id).content_bytes == bytes_kept(submission)


def test_the_drop_leaves_updated_at_alone_so_prune_still_ages_from_the_end(sessions, registry):
    item_id = create(sessions, registry)
    finished_at = state(sessions, item_id).updated_at
    drop_finished_contents(sessions, registry, age=WEEK)
    assert state(sessions, item_id).updated_at == finished_at


def test_a_second_sweep_changes_nothing(sessions, registry):
    item_id = create(sessions, registry)
    assert drop_finished_contents(sessions, registry, age=WEEK) == 1
    first = state(sessions, item_id)
    assert drop_finished_contents(sessions, registry, age=WEEK) == 0
    assert state(sessions, item_id) == first


def test_batches_are_separate_transactions_and_a_budget_leaves_the_rest(sessions, registry):
    items = [create(sessions, registry) for _ in range(5)]
    ticks = iter(range(100))
    # Each batch of 2 "takes" a second: the first batch exhausts a 1 s budget.
    dropped = drop_finished_contents(
        sessions, registry, age=WEEK, batch_size=2, budget_seconds=1, clock=lambda: next(ticks)
    )
    assert dropped == 2
    assert drop_finished_contents(sessions, registry, age=WEEK, batch_size=2) == 3
    assert all(state(sessions, item_id).contents_dropped_at is not None for item_id in items)


def test_two_replicas_sweeping_at_once_drop_each_item_once(sessions, registry):
    items = [create(sessions, registry) for _ in range(30)]
    start = threading.Barrier(2)
    totals: list[int] = []

    def sweep() -> None:
        start.wait()
        totals.append(drop_finished_contents(sessions, registry, age=WEEK, batch_size=3))

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(totals) == 30
    assert all(state(sessions, item_id).contents_dropped_at is not None for item_id in items)


def test_a_row_some_request_holds_is_skipped_not_waited_for(sessions, registry, engine):
    held, free = create(sessions, registry), create(sessions, registry)
    with engine.connect() as holder:
        holder.execute(sa.text("SELECT 1 FROM work_items WHERE id = :id FOR UPDATE"), {"id": held})
        assert drop_finished_contents(sessions, registry, age=WEEK) == 1
        holder.rollback()
    assert state(sessions, free).contents_dropped_at is not None
    assert state(sessions, held).contents_dropped_at is None
    assert drop_finished_contents(sessions, registry, age=WEEK) == 1


def test_stored_bytes_count_until_the_drop(sessions, registry):
    item_id = create(sessions, registry)
    issuer, key = "local", "identity:tests"

    def stored() -> int:
        with sessions() as session:
            return ownership_repository.stored_bytes(session, issuer, key)

    assert stored() == state(sessions, item_id).content_bytes == KEPT_BYTES + DROPPED_BYTES
    drop_finished_contents(sessions, registry, age=WEEK)
    assert stored() == KEPT_BYTES


def test_resubmitting_a_failed_item_whose_contents_were_dropped_restores_them(sessions, registry):
    submission = body(source_branch="workqueue/failed-long-ago", file_actions=FILE_ACTIONS)
    item_id = submit(sessions, registry, submission).item.id
    with sessions() as session:
        session.execute(
            sa.text(
                "UPDATE work_items SET phase = 'failed', actionable = false, "
                "updated_at = now() - interval '8 days' WHERE id = :id"
            ),
            {"id": item_id},
        )
        session.commit()
    drop_finished_contents(sessions, registry, age=WEEK)
    assert state(sessions, item_id).contents_dropped_at is not None

    config = registry.get("mr").config
    assert isinstance(config, MRTypeConfig)
    again = run_in_transaction(
        sessions,
        lambda session: submit_mr(
            session, submission, submitter=Submitter("local", "tests"), config=config
        ),
    )
    assert (again.item.id, again.outcome) == (item_id, SubmitOutcome.RETRIED)
    row = state(sessions, item_id)
    assert row.contents_dropped_at is None
    assert row.content_bytes == KEPT_BYTES + DROPPED_BYTES
    assert row.file_actions[0]["content"] == "Version: 2\n"
    assert (row.description, row.commit_message) == (
        "Automated sync",
        "Sync sources from upstream",
    )


def test_the_processing_sweep_drops_contents(sessions, registry):
    old, recent = create(sessions, registry, days_ago=8), create(sessions, registry, days_ago=6)
    manager = ProcessingManager(
        sessions=sessions,
        registry=registry,
        config=fast_config(),
        handled_types=["mr"],
        content_retention=WEEK,
    )
    manager.start()  # the first safety sweep runs at start
    try:
        wait_until(
            lambda: state(sessions, old).contents_dropped_at is not None, what="the sweep's drop"
        )
    finally:
        manager.stop()
    # Decided by the same statement that took the old one.
    assert state(sessions, recent).contents_dropped_at is None


def test_ensure_mr_refuses_an_item_without_its_contents(sessions, registry, simulator):
    item_id = create(sessions, registry)
    drop_finished_contents(sessions, registry, age=WEEK)
    commits = simulator.request_count("POST", "/projects/:id/repository/commits")
    with sessions() as session:
        # Forced back to work behind the routes' backs: the executor still refuses.
        session.execute(
            sa.text("UPDATE work_items SET phase = 'active', actionable = true WHERE id = :id"),
            {"id": item_id},
        )
        session.commit()
    with running_manager(sessions, registry, fast_config(), handled_types=["mr"]) as manager:
        manager.notify(item_id)
        wait_until(
            lambda: _phase(sessions, item_id) == "failed",
            what="the item to fail",
        )
    assert simulator.request_count("POST", "/projects/:id/repository/commits") == commits
    with sessions() as session:
        error = session.execute(
            sa.text("SELECT error FROM work_items WHERE id = :id"), {"id": item_id}
        ).scalar_one()
    assert "retention.content_days" in error


def _phase(sessions, item_id) -> str:
    with sessions() as session:
        return str(
            session.execute(
                sa.text("SELECT phase FROM work_items WHERE id = :id"), {"id": item_id}
            ).scalar_one()
        )
