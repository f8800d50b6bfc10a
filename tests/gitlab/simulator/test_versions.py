"""`gitlab_version`: the shapes that differ between real GitLab releases, and the
timestamps every captured release writes the same way."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import gitlab
import pytest

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

UTC_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$")
OFFSET_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$")
PROJECT = "acme/widgets"
BRANCH = "feature"


def world(sim: GitLabSimulator, **settings: bool) -> dict[str, int]:
    """A project with an MR (label, failed pipeline, internal note) from a second branch."""
    project_id = sim.create_project(PROJECT, {"README.md": "x\n"}, **settings)
    sim.push(project_id, BRANCH, {"README.md": "y\n"})
    iid = sim.create_merge_request(project_id, BRANCH, "Feature", labels=["bot"])
    pipeline = sim.create_pipeline(
        project_id,
        merge_request_iid=iid,
        jobs=[JobSpec("unit", status="failed", failure_reason="script_failure")],
    )
    [job] = sim.jobs(pipeline)
    note = sim.add_note(project_id, iid, "internal remark", internal=True)
    return {"project": project_id, "iid": iid, "pipeline": pipeline, "job": job["id"], "note": note}


@pytest.fixture(params=["15.5", "15.11", "16.0", "17.6"])
def versioned(request) -> Iterator[tuple[GitLabSimulator, dict[str, int]]]:
    with GitLabSimulator(gitlab_version=request.param) as sim:
        yield sim, world(sim)
        sim.close_webhook_client()
        assert sim.errors == []


def version_of(sim: GitLabSimulator) -> tuple[int, int]:
    return sim.state.gitlab_version


def test_the_default_version_is_a_current_release():
    sim = GitLabSimulator()
    assert sim.state.gitlab_version >= (17, 0)


@pytest.mark.parametrize("bad", ["", "17", "latest", "v17.6", "17.x"])
def test_a_version_that_is_none_is_refused(bad):
    with pytest.raises(ValueError, match="not a GitLab version"):
        GitLabSimulator(gitlab_version=bad)


def test_mr_answers_have_detailed_merge_status_from_15_6(versioned):
    sim, ids = versioned
    with gitlab.Gitlab(sim.url, private_token=sim.token) as gl:
        answer = gl.projects.get(ids["project"]).mergerequests.get(ids["iid"]).attributes
    assert ("detailed_merge_status" in answer) == (version_of(sim) >= (15, 6))
    # What an older answer is judged from is always there.
    assert answer["merge_status"] == "can_be_merged"
    assert answer["has_conflicts"] is False
    assert answer["draft"] is False
    assert answer["blocking_discussions_resolved"] is True
    listed = sim.merge_requests(ids["project"])[0]
    assert ("detailed_merge_status" in listed) == (version_of(sim) >= (15, 6))


def test_hooks_have_detailed_merge_status_from_15_6(versioned):
    sim, ids = versioned
    expected = version_of(sim) >= (15, 6)
    mr_hook = sim.merge_request_hook(ids["project"], ids["iid"])
    assert ("detailed_merge_status" in mr_hook["object_attributes"]) == expected
    assert ("detailed_merge_status" in sim.pipeline_hook(ids["pipeline"])["merge_request"]) == (
        expected
    )
    assert ("detailed_merge_status" in sim.note_hook(ids["note"])["merge_request"]) == expected
    assert mr_hook["object_attributes"]["merge_status"] == "can_be_merged"


def test_job_hooks_carry_the_project_object_from_16_0(versioned):
    sim, ids = versioned
    payload = sim.job_hook(ids["job"])
    assert payload["project_id"] == ids["project"]
    assert payload["project_name"] == "acme / widgets"
    assert payload["repository"]["homepage"].endswith("/acme/widgets")
    if version_of(sim) >= (16, 0):
        assert payload["project"]["path_with_namespace"] == PROJECT
        assert "build_created_at_iso" in payload
    else:
        assert "project" not in payload
        assert not [key for key in payload if key.endswith("_iso")]
        assert not [key for key in payload["commit"] if key.endswith("_iso")]
    assert UTC_STAMP.match(payload["build_created_at"])


def test_hook_timestamps_are_written_as_gitlab_writes_them(versioned):
    sim, ids = versioned
    mr_hook = sim.merge_request_hook(ids["project"], ids["iid"])
    attributes = mr_hook["object_attributes"]
    for key in ("created_at", "updated_at", "prepared_at"):
        assert UTC_STAMP.match(attributes[key]), (key, attributes[key])
    [label] = mr_hook["labels"]
    assert UTC_STAMP.match(label["created_at"])
    assert UTC_STAMP.match(label["updated_at"])
    assert OFFSET_STAMP.match(attributes["last_commit"]["timestamp"])
    for stamp in mr_hook["changes"]["updated_at"].values():
        assert UTC_STAMP.match(stamp)
    note = sim.note_hook(ids["note"])
    assert UTC_STAMP.match(note["object_attributes"]["created_at"])
    assert UTC_STAMP.match(note["merge_request"]["updated_at"])
    pipeline = sim.pipeline_hook(ids["pipeline"])
    assert UTC_STAMP.match(pipeline["object_attributes"]["created_at"])
    assert UTC_STAMP.match(pipeline["builds"][0]["created_at"])


def test_blocking_discussions_resolved_follows_the_project_rule():
    with GitLabSimulator(gitlab_version="15.5") as sim:
        ids = world(sim, only_allow_merge_if_all_discussions_are_resolved=True)
        sim.open_discussion(ids["project"], ids["iid"], "please explain")
        assert (
            sim.merge_request(ids["project"], ids["iid"])["blocking_discussions_resolved"] is False
        )
        hook = sim.merge_request_hook(ids["project"], ids["iid"])
        assert hook["object_attributes"]["blocking_discussions_resolved"] is False
        sim.resolve_discussions(ids["project"], ids["iid"])
        assert (
            sim.merge_request(ids["project"], ids["iid"])["blocking_discussions_resolved"] is True
        )


def test_internal_notes_are_confidential_note_hooks(versioned, receiver):
    sim, ids = versioned
    payload = sim.note_hook(ids["note"])
    assert payload["object_kind"] == "note"
    assert payload["event_type"] == "confidential_note"
    assert payload["object_attributes"]["internal"] is True
    answer = sim.send_webhook(receiver.url, payload, event_uuid=str(uuid.uuid4()))
    assert answer.status_code == 200
    [delivery] = receiver.deliveries
    assert delivery.headers["X-Gitlab-Event"] == "Confidential Note Hook"
    major, minor = version_of(sim)
    assert delivery.headers["User-Agent"] == f"GitLab/{major}.{minor}.0"


def test_public_notes_stay_note_hooks(receiver):
    with GitLabSimulator() as sim:
        ids = world(sim)
        note = sim.add_note(ids["project"], ids["iid"], "public remark")
        payload = sim.note_hook(note)
        assert payload["event_type"] == "note"
        sim.send_webhook(receiver.url, payload)
        assert receiver.deliveries[-1].headers["X-Gitlab-Event"] == "Note Hook"
        sim.close_webhook_client()
