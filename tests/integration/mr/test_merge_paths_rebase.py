"""The target moves under a project that merges fast-forward: GitLab rebases the service's
commit (rebase: auto), a rebase GitLab cannot do is a `conflict`, and nobody's commit
becomes the service's by being rebased."""

from __future__ import annotations

from harness import wait_until
from mr_harness import PROJECT, body, submit
from test_mr_lifecycle_merge import green_pipeline, merged_sha
from test_mr_lifecycle_support import BRANCH, gitlab, lifecycle

from workqueue.queue.models import Phase
from workqueue.types.mr.authorship import stamped_item

REBASE_ROUTE = "/projects/:id/merge_requests/:merge_request_iid/rebase"
PERSON_README = "# project, edited by a person\n"


def rebase_calls(world):
    return world.simulator.app.log.records("PUT", REBASE_ROUTE)


def blocker(world, item_id):
    return (world.detail(item_id).merge_blocker or {}).get("code")


def resubmit(world, **overrides):
    """Submit again as the same caller (the same body unless overridden); the result."""
    result = submit(world.sessions, world.registry, body(**overrides))
    world.manager.notify(result.item.id)
    return result


def service_writes(world):
    """What the service wrote to GitLab (tests drive the simulator through helpers)."""
    return [(r.method, r.route) for r in world.simulator.app.log.writes()]


def test_target_moving_under_a_fast_forward_project_rebases_re_pipes_and_merges(sessions):
    with gitlab(merge_method="ff") as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        pushed = world.detail(item_id).mr_sha
        person = simulator.push(PROJECT, "main", {"README.md": PERSON_README}, message="Docs")
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        wait_until(lambda: world.detail(item_id).mr_sha != pushed, what="the rebased head")
        world.wait_settled()

        rebased = world.detail(item_id).mr_sha
        [commit] = simulator.log_commits(PROJECT, rebased, exclude="main")
        assert commit.parent_ids == (person,)
        assert stamped_item(commit.message) == item_id
        assert len(rebase_calls(world)) == 1
        assert world.merge_calls() == []  # the rebased head has not been tested yet
        assert blocker(world, item_id) == "pipeline_missing"

        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_phase(item_id, Phase.COMPLETED)
        (merge_call,) = world.merge_calls()
        assert merged_sha(merge_call) == rebased
    assert simulator.branch_head(PROJECT, "main") == rebased  # fast-forwarded
    history = {c.id for c in simulator.log_commits(PROJECT, "main")}
    assert person in history
    assert simulator.read_file(PROJECT, "main", "README.md") == PERSON_README.encode()
    assert simulator.read_file(PROJECT, "main", "kernel.spec") == b"Version: 2\n"
    assert world.detail(item_id).completion_reason == "merged"


def test_a_target_that_conflicts_is_a_conflict_and_nothing_is_written(sessions):
    with gitlab(merge_method="ff") as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.push(PROJECT, "main", {"kernel.spec": "Version: 3\n"}, message="Bump")
        pipeline = green_pipeline(world, iid)
        simulator.reset_requests()
        world.send(item_id, world.pipeline_hook(pipeline))
        world.wait_settled()
        assert blocker(world, item_id) == "conflict"
        assert service_writes(world) == []  # no rebase, no merge, no push
        assert world.item(item_id).phase == Phase.ACTIVE

        # The caller resubmits content for the new target: a new commit on it.
        world.submit(
            file_actions=[
                {"action": "update", "file_path": "kernel.spec", "content": "Version: 4\n"}
            ]
        )
        world.wait_settled()
        [commit] = simulator.log_commits(PROJECT, BRANCH, exclude="main")
        assert commit.parent_ids == (simulator.branch_head(PROJECT, "main"),)
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_phase(item_id, Phase.COMPLETED)
    assert simulator.read_file(PROJECT, "main", "kernel.spec") == b"Version: 4\n"


def test_a_rebase_gitlab_cannot_do_is_a_conflict_and_is_not_asked_again(sessions):
    with gitlab(merge_method="ff") as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        pushed = world.detail(item_id).mr_sha
        simulator.push(PROJECT, "main", {"README.md": PERSON_README})
        simulator.fail_next_rebase(PROJECT, iid)
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        wait_until(lambda: blocker(world, item_id) == "conflict", what="the conflict")
        world.wait_settled()
        message = world.detail(item_id).merge_blocker["message"]
        assert "Rebase failed. Please rebase locally" in message
        world.send(item_id, world.mr_hook(iid, "update"))  # anything else: still no write
        world.wait_settled()
        assert len(rebase_calls(world)) == 1
        assert world.merge_calls() == []
        assert simulator.branch_head(PROJECT, BRANCH) == pushed
        assert world.detail(item_id).mr_sha == pushed


def test_identical_content_resubmitted_for_a_conflicted_item_is_pushed_again(sessions):
    with gitlab(merge_method="ff") as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        pushed = world.detail(item_id).mr_sha
        simulator.push(PROJECT, "main", {"README.md": PERSON_README})
        simulator.fail_next_rebase(PROJECT, iid)
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        wait_until(lambda: blocker(world, item_id) == "conflict", what="the conflict")
        world.wait_settled()

        assert resubmit(world).outcome == "updated"  # the same body as before
        world.wait_settled()
        again = world.detail(item_id).mr_sha
        assert again != pushed
        [commit] = simulator.log_commits(PROJECT, again, exclude="main")
        assert commit.parent_ids == (simulator.branch_head(PROJECT, "main"),)
        assert blocker(world, item_id) != "conflict"
        assert resubmit(world).outcome == "unchanged"  # nothing blocks it any more


def test_rebase_off_leaves_need_rebase_to_the_caller(sessions):
    with (
        gitlab(merge_method="ff") as simulator,
        lifecycle(sessions, simulator, rebase="off") as world,
    ):
        item_id, iid = world.open_mr()
        simulator.push(PROJECT, "main", {"README.md": PERSON_README})
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_settled()
        assert blocker(world, item_id) == "need_rebase"
        assert rebase_calls(world) == []
        assert world.merge_calls() == []


def test_a_rebase_that_brings_in_a_persons_commit_is_never_the_services(sessions):
    with gitlab(merge_method="ff") as simulator, lifecycle(sessions, simulator) as world:
        simulator.state.rebase_reads = 1000  # the rebase waits until the test runs it
        item_id, iid = world.open_mr()
        simulator.push(PROJECT, "main", {"README.md": PERSON_README})
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        wait_until(lambda: len(rebase_calls(world)) == 1, what="the rebase request")
        # A person pushes onto the bot branch before GitLab's worker runs the rebase,
        # which then replays both commits.
        simulator.push(PROJECT, BRANCH, {"patches/evil.patch": "+evil\n"}, message="Mine")
        simulator.finish_rebase(PROJECT, iid)
        head = simulator.branch_head(PROJECT, BRANCH)
        green = green_pipeline(world, iid)  # even green on that head
        world.send(item_id, world.mr_hook(iid, "update"), world.pipeline_hook(green))
        world.wait_settled()
        detail = world.detail(item_id)
        assert detail.mr_sha != head
        assert blocker(world, item_id) == "foreign_commits"
        assert world.merge_calls() == []
        assert simulator.read_file(PROJECT, "main", "patches/evil.patch") is None
