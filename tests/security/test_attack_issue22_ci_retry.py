"""Issue 22: the CI retry herder retries a failed job of a merged-results pipeline only when
that pipeline tests the item's own head (real PostgreSQL, the simulator).

A merged-results pipeline runs on a temporary merge commit, not on the head, so the herder
accepts its jobs under the confirmation a merge needs (`merged_results`): GitLab names it
as the MR's head pipeline, its ref is this MR's merge ref, and its commit has the recorded
head among its parents. Anything less would let a person's pipeline (of another commit,
or of another MR that merges the same commit) spend the item's retries and the replica's
retry budget, and retry jobs the service has no business retrying.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "integration" / "mr"))

from harness import fast_config, running_manager, settled, wait_until
from mr_harness import FILES, PROJECT, TOKEN, body, submit
from test_ci_retry_herder import (
    JOB,
    RETRY_ROUTE,
    Scene,
    ci_row,
    detail,
    failed,
    herder_registry,
    jobs_named,
)
from test_mr_lifecycle_support import MR_ROUTE

from workqueue.gitlab.client import GitLabClient
from workqueue.queue.models import DimensionStatus
from workqueue.testing.gitlab_simulator import GitLabSimulator

BRANCH = "workqueue/sync-kernel"


@pytest.fixture
def simulator() -> Iterator[GitLabSimulator]:
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    simulator.create_project(PROJECT, FILES)
    try:
        yield simulator
    finally:
        simulator.stop()
    assert simulator.errors == []


@contextmanager
def herder_scene(sessions, simulator) -> Iterator[Scene]:
    with GitLabClient(simulator.url, TOKEN, timeout=5) as client:
        registry, _ = herder_registry(simulator, client)
        with running_manager(sessions, registry, fast_config(), handled_types=["mr"]) as manager:
            yield Scene(sessions, simulator, manager, registry)


def named_as_head_pipeline(simulator, iid, pipeline_id) -> None:
    """GitLab (or something between) answers that `pipeline_id` is the MR's head pipeline."""
    answer = simulator.merge_request(PROJECT, iid)
    answer["head_pipeline"] = simulator.pipeline(pipeline_id)
    simulator.inject_fault("GET", MR_ROUTE, status=200, body=answer, times=None)


def assert_not_retried(sessions, simulator, item_id, pipeline_id) -> None:
    assert len(jobs_named(simulator, pipeline_id)) == 1
    assert simulator.request_count("POST", RETRY_ROUTE) == 0
    assert detail(sessions, item_id).ci_retry_counts == {}
    assert ci_row(sessions, item_id).status == DimensionStatus.FALSE


def test_a_merged_result_of_another_head_gets_no_job_retried(sessions, simulator):
    with herder_scene(sessions, simulator) as scene:
        item_id, iid = scene.new_item()
        older = detail(sessions, item_id).mr_sha
        submit(sessions, scene.registry, body(commit_message="Another commit", title="v2"))
        scene.manager.notify(item_id)
        wait_until(lambda: detail(sessions, item_id).mr_sha != older, what="the new head")
        wait_until(lambda: settled(sessions), timeout=30)
        # A failed merged result of the OLDER head, on this MR's merge ref.
        stale = simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, merged_results=True, sha=older, jobs=[failed()]
        )
        named_as_head_pipeline(simulator, iid, stale)
        scene.point_at(item_id, stale)
        scene.run(item_id, JOB)
        assert_not_retried(sessions, simulator, item_id, stale)


def test_a_merged_result_of_another_mr_gets_no_job_retried(sessions, simulator):
    with herder_scene(sessions, simulator) as scene:
        item_id, iid = scene.new_item()
        head = detail(sessions, item_id).mr_sha
        # A person's MR from a branch at the item's head: its merged result DOES have the
        # head among its parents, but it is another MR's pipeline (another merge ref).
        simulator.create_branch(PROJECT, "person/copy", ref=head)
        other = simulator.create_merge_request(PROJECT, "person/copy", "A copy")
        theirs = simulator.create_pipeline(
            PROJECT, merge_request_iid=other, merged_results=True, jobs=[failed()]
        )
        with GitLabClient(simulator.url, TOKEN, timeout=5) as client:
            merge_commit = client.get_commit(PROJECT, simulator.pipeline(theirs)["sha"])
        assert head in merge_commit.parent_ids
        named_as_head_pipeline(simulator, iid, theirs)
        scene.point_at(item_id, theirs)
        scene.run(item_id, JOB)
        assert_not_retried(sessions, simulator, item_id, theirs)
