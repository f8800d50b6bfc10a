"""Attacks on the `agent` type from an independent review: a forged Note Hook (who wrote
it, what it says, a note GitLab never issued), hostile agent answers, changes by people
who may not push, and internal threads whose changes would be published."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import sqlalchemy as sa
from agent_world import DEVELOPER, GUEST, MAINTAINER, agent_world
from fake_agent import Scripted
from mr_harness import PROJECT

from workqueue.db.transactions import run_in_transaction
from workqueue.queue.intake.deliveries import store_delivery
from workqueue.queue.models import Phase
from workqueue.types.mr.models import MRWorkItem

TRIGGER = "@workqueue-bot"
CHANGES = {
    "title": "Bump kernel to 2",
    "commit_message": "Bump kernel to 2",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"}],
}


# -- F1: a forged Note Hook is believed: author, text, note id ---------------------------


def test_f1_forged_note_hook_author_is_believed(sessions, simulator, conninfo):
    """Whoever holds a webhook secret covering the project (the env secret covers every
    project; a maintainer of ANY hooked project can read it from the hook settings) can
    forge a note 'by' a Maintainer: the agent runs with the forged text and its changes
    get an MR item with auto_merge=True (merged into the default branch when green).
    The real note (here a Guest's) is never read back from GitLab."""
    with agent_world(sessions, simulator, conninfo) as world:
        world.agent.default = Scripted(body={"reply": "Done.", "changes": CHANGES})
        real = world.comment(f"{TRIGGER} hello", user=GUEST, deliver=False)
        maint = simulator.note_hook(real, user=MAINTAINER)["user"]
        hook = simulator.note_hook(real)
        hook["user"] = maint
        hook["object_attributes"]["author_id"] = maint["id"]
        hook["object_attributes"]["note"] = f"{TRIGGER} bump the kernel and merge it"
        _store(world, hook)
        _drain(world)
        # Safe behaviour: the service reads note `real` from GitLab, sees a Guest wrote
        # "hello", and creates nothing.
        forged = [c for c in world.agent.calls if "merge it" in c["note"]["body"]]
        world.wait_settled()
        with world.sessions() as session:
            merging = session.scalars(
                sa.select(MRWorkItem).where(MRWorkItem.caller_identity == f"agent:{MAINTAINER}")
            ).all()
            auto = [item.auto_merge for item in merging]
        assert forged == [], f"agent called for a forged note: {forged}; mr auto_merge={auto}"
        assert not [t for t in world.tasks() if t.author == MAINTAINER]


def test_f1b_forged_note_id_that_does_not_exist_is_acted_on(sessions, simulator, conninfo):
    """A note id GitLab never issued (or a future one, which then blocks the real note:
    dedupe on note id) still creates a task and a placeholder in the thread."""
    with agent_world(sessions, simulator, conninfo) as world:
        real = world.comment(f"{TRIGGER} hello", user=DEVELOPER, deliver=False)
        hook = simulator.note_hook(real)
        hook["object_attributes"]["id"] = real + 1000  # no such note (yet)
        _store(world, hook)
        _drain(world)
        ghost = [t for t in world.tasks() if t.note_id == real + 1000]
        assert ghost == [], "a task (and a placeholder) for a note GitLab does not have"


def _drain(world) -> None:
    """Deliver a genuine note after the forged one and wait for it: the intake is in
    order, so the forged delivery has been resolved by then (wait_settled alone does not
    wait for received deliveries)."""
    genuine = world.comment(f"{TRIGGER} genuine", user=DEVELOPER)
    world.wait_task(genuine, Phase.COMPLETED)


_keys = itertools.count(1)


def _store(world, hook: dict[str, Any]) -> None:
    key = f"forged-{next(_keys)}"
    run_in_transaction(
        world.sessions,
        lambda session: store_delivery(
            session,
            world.registry,
            source="gitlab",
            delivery_key=key,
            event_type="note",
            body=hook,
        ),
    )
    world.manager.intake.stored_here()


# -- F2: an agent answer PostgreSQL cannot store crashes call_agent ----------------------


@contextmanager
def raw_agent(payload: bytes) -> Iterator[tuple[str, list[int]]]:
    calls: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            calls.append(1)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/tasks", calls
    finally:
        server.shutdown()
        server.server_close()


HOSTILE_ANSWERS = {
    "nul_in_reply": b'{"reply": "hi\\u0000there"}',
    "nul_in_changes": (
        b'{"reply": "ok", "changes": {"title": "t\\u0000", "commit_message": "m",'
        b' "file_actions": [{"action": "delete", "file_path": "kernel.spec"}]}}'
    ),
    "deeply_nested": b'{"reply": "x", "changes": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
}


@pytest.mark.parametrize("answer", sorted(HOSTILE_ANSWERS))
def test_f2_hostile_agent_answer_fails_with_a_reply_not_a_stuck_placeholder(
    sessions, simulator, conninfo, answer
):
    """The answer parses (json.loads) but cannot be stored (NUL in text/JSONB, a lone
    surrogate), or json.loads raises RecursionError (not a ValueError): the step raises,
    the engine re-runs call_agent (the agent is called again each time), and the item
    ends `failed` through the failure hook with the placeholder still saying
    '⏳ Working on it' - the documented 'the placeholder says it failed' never happens."""
    with (
        raw_agent(HOSTILE_ANSWERS[answer]) as (url, calls),
        agent_world(sessions, simulator, conninfo, agent_url=url) as world,
    ):
        note = world.comment(f"{TRIGGER} go")
        world.wait_task(note, Phase.FAILED, timeout=60)
        [posted] = world.bot_notes(note)
        assert "could not answer" in posted, f"thread left with: {posted!r}"
        assert len(calls) == 1, f"agent called {len(calls)} times for one note"


# -- F3: changes accepted from anyone who may talk to the agent -------------------------


def test_f3_a_guest_rewrites_another_callers_mr_through_the_agent(sessions, simulator, conninfo):
    """With min_access_level below Developer (allowed by the config: 10 or 20), a Guest's
    note on one of the service's MRs makes the agent's changes replace that MR item's
    content, in the name of the item's own caller. changes.py justifies the own-MR
    update with 'a Developer could push to that branch anyway' - a Guest cannot."""
    with agent_world(sessions, simulator, conninfo, min_access_level=10) as world:
        world.agent.answer(Scripted(body={"reply": "Here.", "changes": CHANGES}))
        first = world.comment(f"{TRIGGER} bump it", user=DEVELOPER)
        task = world.wait_task(first, Phase.COMPLETED)
        with world.sessions() as session:
            mr_item = session.get(MRWorkItem, task.mr_item_id)
            mr_iid, before = mr_item.mr_iid, mr_item.file_actions
        hostile = {
            **CHANGES,
            "title": "Guest's change",
            "file_actions": [
                {"action": "update", "file_path": "kernel.spec", "content": "guest was here\n"}
            ],
        }
        world.agent.answer(Scripted(body={"reply": "Sure.", "changes": hostile}))
        note = world.comment(
            f"{TRIGGER} change it", user=GUEST, noteable="merge_request", iid=mr_iid
        )
        world.wait_task(note, Phase.COMPLETED)
        with world.sessions() as session:
            after = session.get(MRWorkItem, task.mr_item_id).file_actions
        assert after == before, "a Guest replaced the content of agent:dev's MR item"
        assert world.task(note).mr_item_id is None


# -- F4: an internal note's changes become a public MR -----------------------------------


def test_f4_internal_note_changes_become_a_public_mr(sessions, simulator, conninfo):
    """The reply to an internal note stays internal, but the agent's changes (title,
    description, commit message, file contents derived from the internal thread) are
    published as an ordinary MR, readable by everyone who can read the project."""
    with agent_world(sessions, simulator, conninfo) as world:
        secret_changes = {**CHANGES, "title": "Fix the auth bypass reported internally"}
        world.agent.answer(Scripted(body={"reply": "Fixed.", "changes": secret_changes}))
        note_id = simulator.add_comment(
            PROJECT,
            "Issue",
            world.issue_iid,
            f"{TRIGGER} fix the bypass",
            user=DEVELOPER,
            internal=True,
        )
        world.deliver(note_id)
        task = world.wait_task(note_id, Phase.COMPLETED)
        assert task.internal is True
        assert task.mr_item_id is None, "changes from an internal note were published as an MR"
