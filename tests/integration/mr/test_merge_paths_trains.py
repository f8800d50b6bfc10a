"""Merge trains (the MR is added with its tested sha instead of merged, a dropped car is
re-added once after a new green pipeline) and merged-results pipelines (a pipeline on
`refs/merge-requests/<iid>/merge` counts for the head its merge commit merges)."""

from __future__ import annotations

from harness import wait_until
from mr_harness import PROJECT
from test_mr_lifecycle_merge import merged_sha
from test_mr_lifecycle_support import MR_ROUTE, gitlab, lifecycle

from workqueue.queue.models import Phase
from workqueue.testing.gitlab_simulator import JobSpec

TRAIN_ROUTE = "/projects/:id/merge_trains/merge_requests/:merge_request_iid"


def train_adds(world):
    return world.simulator.app.log.records("POST", TRAIN_ROUTE)


def blocker(world, item_id):
    return (world.detail(item_id).merge_blocker or {}).get("code")


def merged_results(world, iid, status="success", sha=None):
    return world.simulator.create_pipeline(
        PROJECT,
        merge_request_iid=iid,
        merged_results=True,
        sha=sha,
        jobs=[JobSpec("unit-tests", status=status)],
    )


def trains_gitlab():
    return gitlab(merge_trains_enabled=True, only_allow_merge_if_pipeline_succeeds=True)


def car_pipeline(world, iid):
    car = world.simulator.train_car(PROJECT, iid)
    assert car is not None, "the MR is not on the train"
    return car["pipeline"]["id"]


def test_a_merge_train_project_merges_through_the_train_even_after_a_dropped_car(sessions):
    with trains_gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        head = world.detail(item_id).mr_sha
        world.send(item_id, world.pipeline_hook(merged_results(world, iid)))
        wait_until(lambda: blocker(world, item_id) == "in_merge_train", what="the train")
        [added] = train_adds(world)
        assert merged_sha(added) == head  # added naming the tested head
        assert world.merge_calls() == []

        # The train pipeline fails: GitLab drops the car. Its hook is only a hint.
        first_train = car_pipeline(world, iid)
        simulator.set_pipeline_status(first_train, "failed")
        world.send(item_id, world.pipeline_hook(first_train))
        wait_until(lambda: blocker(world, item_id) != "in_merge_train", what="the drop")
        world.wait_settled()
        assert len(train_adds(world)) == 1  # not re-added without a new green pipeline

        world.send(item_id, world.pipeline_hook(merged_results(world, iid)))
        wait_until(lambda: len(train_adds(world)) == 2, what="the second add")
        wait_until(lambda: blocker(world, item_id) == "in_merge_train", what="the train")
        second_train = car_pipeline(world, iid)
        assert second_train != first_train
        simulator.set_pipeline_status(second_train, "success")  # GitLab merges it
        world.send(item_id, world.mr_hook(iid, "merge"))
        world.wait_phase(item_id, Phase.COMPLETED)
        assert world.merge_calls() == []
    assert simulator.merge_request(PROJECT, iid)["state"] == "merged"
    assert world.detail(item_id).completion_reason == "merged"
    assert simulator.read_file(PROJECT, "main", "kernel.spec") == b"Version: 2\n"


def test_a_car_dropped_twice_is_merge_refused_and_not_added_again(sessions):
    with trains_gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        for attempt in (1, 2):
            world.send(item_id, world.pipeline_hook(merged_results(world, iid)))
            wait_until(lambda n=attempt: len(train_adds(world)) == n, what=f"add {attempt}")
            wait_until(lambda: blocker(world, item_id) == "in_merge_train", what="the train")
            train = car_pipeline(world, iid)
            simulator.set_pipeline_status(train, "failed")
            world.send(item_id, world.pipeline_hook(train))
            wait_until(lambda: blocker(world, item_id) != "in_merge_train", what="the drop")
            world.wait_settled()
        world.send(item_id, world.pipeline_hook(merged_results(world, iid)))
        world.wait_settled()
        assert blocker(world, item_id) == "merge_refused"
        assert len(train_adds(world)) == 2
        assert world.merge_calls() == []
        assert world.item(item_id).phase == Phase.ACTIVE


def test_a_train_add_refused_is_retried_with_backoff(sessions):
    with trains_gitlab() as simulator, lifecycle(sessions, simulator) as world:
        simulator.refuse_merges(400, train=True, times=1)
        item_id, iid = world.open_mr()
        world.send(item_id, world.pipeline_hook(merged_results(world, iid)))
        wait_until(lambda: len(train_adds(world)) == 2, what="the retried add")
        wait_until(lambda: blocker(world, item_id) == "in_merge_train", what="the train")
        simulator.set_pipeline_status(car_pipeline(world, iid), "success")
        world.send(item_id, world.mr_hook(iid, "merge"))
        world.wait_phase(item_id, Phase.COMPLETED)


# -- merged-results pipelines ------------------------------------------------------------


def test_a_merged_results_pipeline_merges(sessions):
    with (
        gitlab(only_allow_merge_if_pipeline_succeeds=True) as simulator,
        lifecycle(sessions, simulator) as world,
    ):
        item_id, iid = world.open_mr()
        head = world.detail(item_id).mr_sha
        simulator.push(PROJECT, "main", {"README.md": "# moved on\n"})
        pipeline = merged_results(world, iid)
        world.send(item_id, world.pipeline_hook(pipeline))
        world.wait_phase(item_id, Phase.COMPLETED)
        (call,) = world.merge_calls()
        assert merged_sha(call) == head  # the MR head, never the temporary merge commit
    detail = world.detail(item_id)
    assert detail.completion_reason == "merged"
    assert detail.head_pipeline_id == pipeline
    assert detail.merge_blocker is None


def test_a_merged_results_pipeline_of_another_head_never_merges(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr(title="Sync kernel sources v1")
        older = world.detail(item_id).mr_sha
        world.submit(title="Sync kernel sources v2", commit_message="Another commit")
        world.wait_settled()
        head = world.detail(item_id).mr_sha
        assert head != older
        # GitLab (or something between) reports as head pipeline a green merged result
        # of the OLDER head: its merge commit does not merge what would be merged.
        stale = merged_results(world, iid, sha=older)
        answer = simulator.merge_request(PROJECT, iid)
        answer["head_pipeline"] = simulator.pipeline(stale)
        simulator.inject_fault("GET", MR_ROUTE, status=200, body=answer, times=None)
        world.send(item_id, world.pipeline_hook(stale), world.mr_hook(iid, "update"))
        world.wait_settled()
        assert world.merge_calls() == []
        assert blocker(world, item_id) == "pipeline_stale_sha"
        assert world.item(item_id).phase == Phase.ACTIVE


def test_a_forged_pipeline_hook_for_a_merge_commit_merges_nothing(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        running = merged_results(world, iid, status="running")
        forged = simulator.pipeline_hook(running)
        forged["object_attributes"]["status"] = "success"
        for build in forged["builds"]:
            build["status"] = "success"
        world.send(item_id, ("pipeline", forged))
        world.wait_settled()
        assert world.merge_calls() == []
        assert blocker(world, item_id) == "pipeline_running"
