"""The `agent` type end to end: a note in a thread → placeholder → the agent called with
the documented body → the placeholder edited into the reply; changes become an `mr`
item through the trust boundary. Real PostgreSQL, the engine, the GitLab simulator and
a fake agent over HTTP."""

from __future__ import annotations

import uuid

from agent_world import AGENT_TOKEN, DEVELOPER, GUEST, MAINTAINER, agent_world
from fake_agent import Scripted
from harness import wait_until
from mr_harness import PROJECT, body, submit

from workqueue.db.transactions import run_in_transaction
from workqueue.queue import enqueue
from workqueue.queue.intake.deliveries import store_delivery
from workqueue.queue.models import Phase
from workqueue.types.agent.models import AgentWorkItem
from workqueue.types.agent.replies import NEUTRALISED_NOTICE
from workqueue.types.mr.models import MRWorkItem

TRIGGER = "@workqueue-bot"
CHANGES = {
    "title": "Bump kernel to 2",
    "commit_message": "Bump kernel to 2",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"}],
}


def test_a_developers_note_is_answered_in_its_thread(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo) as world:
        world.agent.answer(Scripted(body={"reply": "Bumped to **2**.", "changes": None}))
        note = world.comment(f"{TRIGGER} please bump the version")
        task = world.wait_task(note, Phase.COMPLETED)
        assert task.state == "replied"
        [call] = world.agent.calls
        assert call == {
            "task_id": str(task.id),
            "session_id": str(task.session_id),
            "project": PROJECT,
            "noteable": {"type": "issue", "iid": world.issue_iid},
            "note": {"id": note, "author": DEVELOPER, "body": "please bump the version"},
            "history": [],
        }
        assert world.agent.headers[0]["authorization"] == f"Bearer {AGENT_TOKEN}"
        [reply] = world.bot_notes(note)  # one note of the service: the placeholder, edited
        assert "Bumped to **2**." in reply
        assert task.reply_note_id is not None


def test_changes_become_an_mr_item_and_the_reply_links_it(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo) as world:
        world.agent.answer(Scripted(body={"reply": "Here you go.", "changes": CHANGES}))
        note = world.comment(f"{TRIGGER} bump it")
        task = world.wait_task(note, Phase.COMPLETED)
        assert task.mr_item_id is not None
        with world.sessions() as session:
            mr_item = session.get(MRWorkItem, task.mr_item_id)
            assert mr_item is not None
            assert (mr_item.caller_issuer, mr_item.caller_identity) == ("agent", "agent:dev")
            assert mr_item.source_branch.startswith("workqueue/agent-")
            assert mr_item.auto_merge is False  # a Developer's changes wait for a person
            assert mr_item.mr_iid is not None
        [reply] = world.bot_notes(note)
        assert f"/ui/items/{task.mr_item_id}" in reply
        opened = simulator.merge_request(PROJECT, mr_item.mr_iid)
        assert opened["state"] == "opened"


def test_a_maintainers_changes_merge_when_green(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo) as world:
        world.agent.answer(Scripted(body={"reply": "Done.", "changes": CHANGES}))
        note = world.comment(f"{TRIGGER} bump it", user=MAINTAINER)
        task = world.wait_task(note, Phase.COMPLETED)
        with world.sessions() as session:
            assert session.get(MRWorkItem, task.mr_item_id).auto_merge is True


def test_a_guests_note_and_other_notes_create_nothing(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo) as world:
        world.comment(f"{TRIGGER} do it", user=GUEST)
        world.comment(f"{TRIGGER} do it", user="stranger")  # no member at all
        world.comment("just a comment")
        world.comment(f"please {TRIGGER} do it")
        world.wait_settled()
        assert world.tasks() == []
        assert world.agent.calls == []


def test_the_same_note_delivered_twice_is_one_task_and_an_edit_is_none(
    sessions, simulator, conninfo
):
    with agent_world(sessions, simulator, conninfo) as world:
        note = world.comment(f"{TRIGGER} once", deliver=False)
        world.deliver(note)
        world.deliver(note)  # GitLab retried with another delivery id
        world.wait_task(note, Phase.COMPLETED)
        world.deliver(note, action="update")
        world.wait_settled()
        assert len(world.tasks()) == 1
        assert len(world.agent.calls) == 1
        assert len(world.bot_notes(note)) == 1


def test_a_follow_up_in_the_thread_carries_the_history(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo) as world:
        world.agent.answer(
            Scripted(body={"reply": "First answer."}), Scripted(body={"reply": "Second."})
        )
        first = world.comment(f"{TRIGGER} first question")
        world.wait_task(first, Phase.COMPLETED)
        thread = simulator.note_discussion_id(first)
        follow_up = world.comment(f"{TRIGGER} and then?", discussion_id=thread)
        second = world.wait_task(follow_up, Phase.COMPLETED)
        assert second.session_id == world.task(first).session_id
        assert world.agent.calls[1]["history"] == [
            {
                "note": {"id": first, "author": DEVELOPER, "body": "first question"},
                "reply": "First answer.",
            }
        ]
        assert world.agent.calls[1]["session_id"] == world.agent.calls[0]["session_id"]
        # A note elsewhere is a new session.
        other = world.comment(f"{TRIGGER} unrelated")
        assert world.wait_task(other, Phase.COMPLETED).session_id != second.session_id


def test_the_agent_failing_twice_then_answering_gives_one_reply(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo) as world:
        world.agent.answer(
            Scripted(status=500, body={"error": "boom"}),
            Scripted(status=503, body={}),
            Scripted(body={"reply": "Third time lucky."}),
        )
        note = world.comment(f"{TRIGGER} try")
        task = world.wait_task(note, Phase.COMPLETED)
        assert len(world.agent.calls) == 3
        assert task.agent_calls == 3
        [reply] = world.bot_notes(note)
        assert "Third time lucky." in reply


def test_an_agent_that_keeps_timing_out_fails_the_task_with_a_reply(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo, timeout_seconds=0.5, max_attempts=2) as world:
        world.agent.default = Scripted(body={"reply": "too late"}, delay=2)
        note = world.comment(f"{TRIGGER} slow")
        task = world.wait_task(note, Phase.FAILED)
        assert task.state == "failed"
        assert len(world.agent.calls) == 2
        [reply] = world.bot_notes(note)
        assert "could not answer" in reply
        assert "no answer within 0.5 s" in task.error
        assert "no answer within 0.5 s" in task.reason


def test_a_reply_that_would_act_on_gitlab_is_neutralised(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo) as world:
        world.agent.answer(Scripted(body={"reply": "Merging now @all\n/merge\n/close"}))
        note = world.comment(f"{TRIGGER} merge it")
        world.wait_task(note, Phase.COMPLETED)
        [reply] = world.bot_notes(note)
        assert NEUTRALISED_NOTICE in reply
        assert not [line for line in reply.splitlines() if line.startswith(("/", "@"))]
        issue = simulator.issue(PROJECT, world.issue_iid)
        assert issue["state"] == "opened"  # no quick action ran


def test_changes_touching_a_blocklisted_path_are_refused_and_nothing_is_written(
    sessions, simulator, conninfo
):
    with agent_world(sessions, simulator, conninfo) as world:
        bad = {
            **CHANGES,
            "file_actions": [
                {"action": "update", "file_path": ".gitlab-ci.yml", "content": "evil: true\n"}
            ],
        }
        world.agent.answer(Scripted(body={"reply": "Changed CI.", "changes": bad}))
        before = len(simulator.app.log.records("POST"))
        note = world.comment(f"{TRIGGER} change ci")
        task = world.wait_task(note, Phase.COMPLETED)
        assert task.mr_item_id is None
        assert ".gitlab-ci.yml" in task.changes_refused
        [reply] = world.bot_notes(note)
        assert "were not applied" in reply
        commits = [r for r in simulator.app.log.records("POST") if "commits" in r.path]
        assert commits == []
        assert len(simulator.app.log.records("POST")) >= before


def test_a_note_in_a_project_out_of_scope_creates_nothing(sessions, simulator, conninfo):
    simulator.create_project("elsewhere/app", {"README.md": "x\n"})
    simulator.add_member("elsewhere/app", DEVELOPER, 30)
    with agent_world(sessions, simulator, conninfo) as world:
        iid = simulator.create_issue("elsewhere/app", "x")
        note = simulator.add_comment("elsewhere/app", "Issue", iid, f"{TRIGGER} hi", user=DEVELOPER)
        world.deliver(note)
        world.wait_settled()
        assert world.tasks() == []


def test_rate_limits_answer_once_and_call_no_agent(sessions, simulator, conninfo):
    limits = {"rate_limit": {"per_user_per_hour": 2, "per_project_per_hour": 100}}
    with agent_world(sessions, simulator, conninfo, **limits) as world:
        allowed = [world.comment(f"{TRIGGER} {n}") for n in range(2)]
        for note in allowed:
            world.wait_task(note, Phase.COMPLETED)
        over = world.comment(f"{TRIGGER} third")
        task = world.wait_task(over, Phase.COMPLETED)
        assert task.state == "rate_limited"
        [answer] = world.bot_notes(over)
        assert "Not now" in answer
        world.comment(f"{TRIGGER} fourth")
        world.wait_settled()
        assert len(world.tasks()) == 3  # the fourth creates nothing: told once an hour
        assert len(world.agent.calls) == 2
        assert uuid.UUID(str(task.id))


def test_on_the_services_own_mr_the_changes_update_its_item(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo) as world:
        existing = submit(sessions, world.registry, body(auto_merge=True)).item
        world.manager.notify(existing.id)

        def mr_iid() -> int | None:
            with world.sessions() as session:
                return session.get(MRWorkItem, existing.id).mr_iid

        wait_until(lambda: mr_iid() is not None, what="the item's MR")
        world.wait_settled()
        world.agent.answer(Scripted(body={"reply": "Updated.", "changes": CHANGES}))
        note = world.comment(f"{TRIGGER} bump to 2", noteable="merge_request", iid=mr_iid())
        task = world.wait_task(note, Phase.COMPLETED)
        assert task.mr_item_id == existing.id
        with world.sessions() as session:
            updated = session.get(MRWorkItem, existing.id)
            assert updated.file_actions[0]["content"] == "Version: 2\n"
            # A Developer's changes never merge by themselves, even on an auto-merging MR.
            assert updated.auto_merge is False
            assert (updated.caller_issuer, updated.caller_identity) == ("local", "tests")


def test_a_confidential_note_is_answered_in_an_internal_note(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo) as world:
        note_id = simulator.add_comment(
            PROJECT, "Issue", world.issue_iid, f"{TRIGGER} secret", user=DEVELOPER, internal=True
        )
        world.deliver(note_id)
        task = world.wait_task(note_id, Phase.COMPLETED)
        assert task.internal is True
        thread = world.thread_of(note_id)
        replies = [n for n in thread if n["author"]["username"] == simulator.bot.username]
        assert [n["internal"] for n in replies] == [True]


def test_settling_waits_for_the_intake(sessions, simulator, conninfo):
    """The harness's own guarantee: "creates nothing" tests mean it only if settling
    waits until stored deliveries are resolved."""
    with agent_world(sessions, simulator, conninfo) as world:
        world.comment(f"{TRIGGER} do it", user=DEVELOPER)
        world.wait_settled()
        assert world.tasks() != []


def test_a_developer_may_merge_where_developers_may_merge(sessions, simulator, conninfo):
    """The merge right is GitLab's: on an unprotected default branch a Developer may merge,
    so the agent's changes for them merge when green."""
    simulator.configure_project(PROJECT, protected_branches=[])
    with agent_world(sessions, simulator, conninfo) as world:
        world.agent.answer(Scripted(body={"reply": "Done.", "changes": CHANGES}))
        note = world.comment(f"{TRIGGER} bump it", user=DEVELOPER)
        task = world.wait_task(note, Phase.COMPLETED)
        with world.sessions() as session:
            assert session.get(MRWorkItem, task.mr_item_id).auto_merge is True


def test_a_failed_task_retried_asks_the_agent_again(sessions, simulator, conninfo):
    with agent_world(sessions, simulator, conninfo, max_attempts=1) as world:
        world.agent.answer(Scripted(status=500, body={}))
        note = world.comment(f"{TRIGGER} try")
        failed = world.wait_task(note, Phase.FAILED)
        retry_hook = world.registry.get("agent").retry_hook
        with world.sessions() as session:  # what `POST /api/work-items/{id}/retry` does
            task = session.get(AgentWorkItem, failed.id)
            retry_hook(session, task)
            enqueue.mark_actionable(session, failed.id, "agent", reactivate=True)
            session.commit()
        world.manager.notify(failed.id)
        done = world.wait_task(note, Phase.COMPLETED)
        assert done.state == "replied"
        [reply] = world.bot_notes(note)  # the same note, now the answer
        assert "Done." in reply


def test_changes_to_the_projects_own_ci_file_are_refused(sessions, simulator, conninfo):
    simulator.configure_project(PROJECT, ci_config_path="ci/pipeline.yml")
    with agent_world(sessions, simulator, conninfo) as world:
        ci = {
            **CHANGES,
            "file_actions": [
                {"action": "create", "file_path": "ci/pipeline.yml", "content": "evil: 1\n"}
            ],
        }
        world.agent.answer(Scripted(body={"reply": "Changed the pipeline.", "changes": ci}))
        note = world.comment(f"{TRIGGER} change the pipeline")
        task = world.wait_task(note, Phase.COMPLETED)
        assert task.mr_item_id is None
        assert "ci/pipeline.yml" in (task.changes_refused or "") or "CI" in task.changes_refused


def test_a_hook_without_the_users_id_is_answered(sessions, simulator, conninfo):
    """As older GitLab sends it (and the captured gitlab4j and go-scm bodies show)."""
    with agent_world(sessions, simulator, conninfo) as world:
        note = world.comment(f"{TRIGGER} old hook", deliver=False)
        hook = simulator.note_hook(note)
        del hook["user"]["id"]
        run_in_transaction(
            world.sessions,
            lambda session: store_delivery(
                session,
                world.registry,
                source="gitlab",
                delivery_key="old-gitlab",
                event_type="note",
                body=hook,
            ),
        )
        world.manager.intake.stored_here()
        assert world.wait_task(note, Phase.COMPLETED).author == DEVELOPER
