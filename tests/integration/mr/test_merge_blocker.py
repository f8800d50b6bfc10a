"""`details.merge_blocker` end to end: the simulator reports each merge state GitLab has,
reconcile_mr names it with its code, and the code clears when its cause does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from harness import wait_until
from mr_harness import PROJECT
from test_mr_lifecycle_support import BRANCH, Lifecycle, gitlab, lifecycle

from workqueue.queue.models import Phase
from workqueue.testing.gitlab_simulator import JobSpec

Step = Callable[[Lifecycle, int], Any]


def blocker(world: Lifecycle, item_id) -> dict[str, str] | None:
    return world.detail(item_id).merge_blocker


def look_again(world: Lifecycle, item_id, iid: int) -> None:
    """What GitLab's MR update hook does: reconcile_mr reads the MR again."""
    world.send(item_id, world.mr_hook(iid, "update"))
    world.wait_settled()


def pipeline(status: str) -> Step:
    def run(world: Lifecycle, iid: int) -> None:
        world.simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status=status)]
        )

    return run


def push_main(files: dict[str, str]) -> Step:
    return lambda world, _iid: world.simulator.push(PROJECT, "main", files)


def nothing(_world: Lifecycle, _iid: int) -> None:
    """GitLab's state as the MR was opened."""


SCENARIOS: list[tuple[str, dict[str, Any], dict[str, Any], Step, str, str]] = [
    # (name, project settings, submission, what happens, code, words in the message)
    ("no pipeline", {}, {}, nothing, "pipeline_missing", "no pipeline has run"),
    (
        "CI required, none yet",
        {"only_allow_merge_if_pipeline_succeeds": True},
        {},
        nothing,
        "pipeline_missing",
        "(ci_must_pass)",
    ),
    ("running", {}, {}, pipeline("running"), "pipeline_running", "running"),
    (
        "running, CI required",
        {"only_allow_merge_if_pipeline_succeeds": True},
        {},
        pipeline("running"),
        "pipeline_running",
        "ci_still_running",
    ),
    ("failed", {}, {}, pipeline("failed"), "pipeline_failed", "failed"),
    ("auto_merge off", {}, {"auto_merge": False}, pipeline("success"), "auto_merge_disabled", ""),
    ("draft", {}, {"title": "Draft: sync"}, pipeline("success"), "draft", "draft"),
    (
        "approval missing",
        {"approvals_required": 1},
        {},
        pipeline("success"),
        "not_approved",
        "not_approved",
    ),
    (
        "changes requested",
        {},
        {},
        lambda w, i: w.simulator.request_changes(PROJECT, i),
        "requested_changes",
        "requested_changes",
    ),
    (
        "open thread",
        {"only_allow_merge_if_all_discussions_are_resolved": True},
        {},
        lambda w, i: w.simulator.open_discussion(PROJECT, i, "why?"),
        "discussions_not_resolved",
        "discussions_not_resolved",
    ),
    ("conflict", {}, {}, push_main({"kernel.spec": "Version: 9\n"}), "conflict", "conflict"),
    (
        "fast-forward only, rebase off",
        {"merge_method": "ff", "service": {"rebase": "off"}},
        {},
        push_main({"README.md": "# moved on\n"}),
        "need_rebase",
        "need_rebase",
    ),
    (
        "someone pushed",
        {},
        {},
        lambda w, _i: w.simulator.push(PROJECT, BRANCH, {"extra.txt": "mine\n"}),
        "foreign_commits",
        "not the commit the service pushed",
    ),
    (
        "not yet checked",
        {},
        {},
        lambda w, i: w.simulator.delay_mergeability(PROJECT, i, unchecked=1000),
        "gitlab_checking",
        "unchecked",
    ),
    (
        "approval rules syncing",
        {},
        {},
        lambda w, i: w.simulator.delay_mergeability(PROJECT, i, approvals_syncing=1000),
        "gitlab_checking",
        "approvals_syncing",
    ),
    (
        "checking",
        {"checking_reads": 1000},
        {},
        nothing,
        "gitlab_checking",
        "checking",
    ),
    (
        "blocked by another MR",
        {},
        {},
        lambda w, i: w.simulator.block_merge(PROJECT, i, "merge_request_blocked"),
        "other",
        "merge_request_blocked",
    ),
]


@pytest.mark.parametrize(
    ("settings", "submission", "happens", "code", "words"),
    [scenario[1:] for scenario in SCENARIOS],
    ids=[scenario[0] for scenario in SCENARIOS],
)
def test_each_merge_state_has_its_code(sessions, settings, submission, happens, code, words):
    # `service`: the `handled_types.mr` section; the rest are the project's settings.
    project = {key: value for key, value in settings.items() if key != "service"}
    service = settings.get("service", {})
    with gitlab(**project) as simulator, lifecycle(sessions, simulator, **service) as world:
        item_id = world.submit(**submission)
        wait_until(lambda: world.detail(item_id).mr_iid is not None, what="the MR")
        world.wait_settled()
        iid = world.detail(item_id).mr_iid
        happens(world, iid)
        look_again(world, item_id, iid)
        wait_until(
            lambda: (blocker(world, item_id) or {}).get("code") == code,
            what=f"merge_blocker {code} (is {blocker(world, item_id)})",
        )
        shown = blocker(world, item_id)
        assert words in shown["message"]
        assert "None" not in shown["message"]
        assert shown["since"]
        assert world.item(item_id).phase == Phase.ACTIVE
        assert world.merge_calls() == []


def test_since_holds_while_the_code_does_and_the_blocker_clears_on_merge(sessions):
    with gitlab(approvals_required=1) as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        assert blocker(world, item_id)["code"] == "not_approved"
        since = blocker(world, item_id)["since"]
        pipeline("running")(world, iid)
        look_again(world, item_id, iid)
        # The pipeline runs, but GitLab's status still names the approval first.
        assert blocker(world, item_id)["code"] == "not_approved"
        assert blocker(world, item_id)["since"] == since  # same code: same since

        simulator.approve(PROJECT, iid)
        look_again(world, item_id, iid)
        assert blocker(world, item_id)["code"] == "pipeline_running"
        assert blocker(world, item_id)["since"] != since

        pipeline("success")(world, iid)
        look_again(world, item_id, iid)
        world.wait_phase(item_id, Phase.COMPLETED)
        assert blocker(world, item_id) is None


def test_requested_changes_and_threads_clear_when_resolved(sessions):
    settings = {"only_allow_merge_if_all_discussions_are_resolved": True}
    with gitlab(**settings) as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.request_changes(PROJECT, iid)
        simulator.open_discussion(PROJECT, iid, "please explain")
        look_again(world, item_id, iid)
        assert blocker(world, item_id)["code"] == "discussions_not_resolved"
        simulator.resolve_discussions(PROJECT, iid)
        look_again(world, item_id, iid)
        assert blocker(world, item_id)["code"] == "requested_changes"
        simulator.approve(PROJECT, iid)  # the reviewer's approval withdraws the request
        look_again(world, item_id, iid)
        assert blocker(world, item_id)["code"] == "pipeline_missing"


def test_a_settling_status_is_looked_at_again_until_it_settles(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.delay_mergeability(PROJECT, iid, unchecked=2, approvals_syncing=1)
        look_again(world, item_id, iid)
        # Deferred re-checks (0.2 s here) read the MR until GitLab has settled.
        wait_until(
            lambda: (blocker(world, item_id) or {}).get("code") == "pipeline_missing",
            what="the check to settle",
        )
