"""The service touches only its own MRs, and only GitLab ends an item (v1.1 trust boundary).

A person's MR is never retitled, relabelled, merged or closed; an MR someone
retargeted is not merged; a Merge Request Hook claiming a merge or a close is
checked with one MR GET before the item's phase changes.
"""

from __future__ import annotations

from typing import Any

from mr_harness import PROJECT
from test_mr_lifecycle_support import BRANCH, MR_ROUTE, gitlab, lifecycle

from workqueue.queue.models import Phase
from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec


def gitlab_state(simulator: GitLabSimulator) -> dict[str, Any]:
    """Everything a person could see of the project: branches, trees, MRs and their notes."""
    merge_requests = simulator.merge_requests(PROJECT)
    return {
        "branches": simulator.branches(PROJECT),
        "trees": {name: simulator.files(PROJECT, name) for name in simulator.branches(PROJECT)},
        "merge_requests": merge_requests,
        "notes": {mr["iid"]: simulator.notes(PROJECT, mr["iid"]) for mr in merge_requests},
    }


def test_a_persons_branch_and_mr_are_left_byte_for_byte_untouched(sessions):
    with (
        gitlab() as simulator,
        lifecycle(sessions, simulator, source_branch_prefix="") as world,
    ):
        theirs = simulator.push(PROJECT, "feature/login", {"login.py": "x = 1\n"}, message="Login")
        iid = simulator.create_merge_request(
            PROJECT, "feature/login", "Login page", labels=["frontend"]
        )
        before = gitlab_state(simulator)
        simulator.reset_requests()

        item_id = world.submit(source_branch="feature/login", title="Takeover", labels=["bot"])
        row = world.wait_phase(item_id, Phase.FAILED)
        assert theirs in row.error
        assert simulator.log.writes() == []
        assert gitlab_state(simulator) == before
        assert simulator.merge_request(PROJECT, iid)["title"] == "Login page"


def test_a_persons_mr_from_the_bot_branch_fails_the_item_instead_of_being_adopted(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, ours = world.open_mr()
        simulator.create_branch(PROJECT, "release")
        # A person opens their own MR from the service's branch into another target.
        theirs = simulator.create_merge_request(
            PROJECT, BRANCH, "Backport to release", target_branch="release"
        )
        before = gitlab_state(simulator)
        simulator.reset_requests()

        world.submit(title="Sync kernel sources v3", labels=["bot", "v3"])
        row = world.wait_phase(item_id, Phase.FAILED)
        assert f"!{theirs} by ada" in row.error
        assert simulator.log.writes() == []
        assert gitlab_state(simulator) == before  # neither their MR nor ours changed
        assert simulator.merge_request(PROJECT, ours)["title"] == "Sync kernel sources"


def test_a_persons_mr_into_the_target_is_not_taken_for_the_services(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        # The service's branch exists (its earlier push), a person opened the MR.
        first_id, ours = world.open_mr()
        simulator.close_merge_request(PROJECT, ours, user=simulator.bot.username)
        world.send(first_id, world.mr_hook(ours, "close", user=simulator.bot.username))
        world.wait_phase(first_id, Phase.CANCELLED)
        theirs = simulator.create_merge_request(PROJECT, BRANCH, "Mine now")
        before = gitlab_state(simulator)
        simulator.reset_requests()

        second_id = world.submit(title="Second generation")
        row = world.wait_phase(second_id, Phase.FAILED)
        assert f"!{theirs} by ada" in row.error
        assert simulator.log.writes() == []
        assert gitlab_state(simulator) == before


def test_an_mr_retargeted_by_someone_is_not_merged(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.create_branch(PROJECT, "release")
        with simulator.state.lock:  # a person edits the MR's target branch
            project = simulator.state.find_project(PROJECT)
            assert project is not None
            project.merge_requests[iid].target_branch = "release"
        pipeline_id = simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="success")]
        )
        assert simulator.merge_request(PROJECT, iid)["detailed_merge_status"] == "mergeable"
        world.send(item_id, world.pipeline_hook(pipeline_id), world.mr_hook(iid, "update"))
        world.wait_settled()
        assert world.merge_calls() == []
        assert simulator.merge_request(PROJECT, iid)["state"] == "opened"
        assert world.item(item_id).phase == Phase.ACTIVE


def test_a_hook_saying_merged_for_an_open_mr_leaves_the_item_active(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        forged: list[tuple[str, dict[str, Any]]] = []
        for action, state in (("merge", "merged"), ("close", "closed")):
            _, body = world.mr_hook(iid, action)
            body["object_attributes"]["state"] = state
            body["object_attributes"]["updated_at"] = "2999-01-01T00:00:00Z"
            forged.append(("merge_request", body))
        simulator.reset_requests()

        world.send(item_id, *forged)
        world.wait_settled()
        row, detail = world.item(item_id), world.detail(item_id)
        assert (row.phase, row.error) == (Phase.ACTIVE, None)
        assert detail.completion_reason is None
        assert simulator.merge_request(PROJECT, iid)["state"] == "opened"
        assert simulator.request_count("GET", MR_ROUTE) >= 1  # GitLab was asked

        # The real merge, with the same hook, does end it.
        simulator.merge(PROJECT, iid)
        world.send(item_id, world.mr_hook(iid, "merge"))
        world.wait_phase(item_id, Phase.COMPLETED)
        assert world.detail(item_id).completion_reason == "merged"


def test_a_person_closing_an_mr_whose_change_already_landed_cancels_the_item(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.push(
            PROJECT, "main", {"kernel.spec": "Version: 2\n", "patches/new.patch": "+fix\n"}
        )
        simulator.close_merge_request(PROJECT, iid)  # by ada, not by the service
        world.send(item_id, world.mr_hook(iid, "close"))
        world.wait_phase(item_id, Phase.CANCELLED)
        assert world.detail(item_id).completion_reason is None
        assert simulator.branch_head(PROJECT, BRANCH) is not None
