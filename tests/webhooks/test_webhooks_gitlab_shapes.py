"""Every webhook shape real GitLab releases send (`gitlab_shapes`), through the parser, the
resolvers (real PostgreSQL) and the receiver: each is read, reaches the item it names,
and none is answered 5xx."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from gitlab_shapes import (
    BRANCH,
    IID,
    JOB,
    PIPELINE,
    PROJECT,
    PROJECT_ID,
    SHA,
    SHAPES,
    Shape,
)
from webhook_support import NEW_SECRET, make_item, mr_registry, pending, webhook_app

from workqueue.gitlab.webhook_bodies import (
    gitlab_event_type,
    job_hook,
    merge_request_hook,
    note_hook,
    pipeline_hook,
    push_hook,
)
from workqueue.types.mr.resolvers import MR_RESOLVERS
from workqueue.types.trunk.events import resolve_pipeline

IDS = [shape.name for shape in SHAPES]
PARSERS = {
    "merge_request": merge_request_hook,
    "pipeline": pipeline_hook,
    "build": job_hook,
    "note": note_hook,
    "push": push_hook,
}


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_each_shape_is_taken_for_its_kind(shape: Shape):
    assert gitlab_event_type(shape.body, shape.header) == shape.kind


@pytest.mark.parametrize("shape", [s for s in SHAPES if s.kind in PARSERS], ids=lambda s: s.name)
def test_each_shape_is_read_by_the_parser(shape: Shape):
    record = PARSERS[shape.kind](shape.body)
    assert record is not None
    project = record.project
    if "project" in shape.body:
        assert project.path == PROJECT
    if shape.body.get("project", {}).get("id") or shape.body.get("project_id"):
        assert project.id == PROJECT_ID
    if shape.kind == "merge_request":
        assert (record.iid, record.source_branch) == (IID, BRANCH)
        assert record.updated_at is not None
        assert record.updated_at.tzinfo is UTC
    elif shape.kind == "pipeline":
        assert record.sha is not None
        assert record.finished_at == datetime(2025, 3, 1, 10, 5, tzinfo=UTC)
        assert {build.name for build in record.builds} == {"unit", "lint"}
    elif shape.kind == "build":
        assert (record.build_id, record.pipeline_id, record.sha) == (JOB, PIPELINE, SHA)
    elif shape.kind == "note":
        assert record.noteable_type in {"MergeRequest", "Commit", "Issue", "Snippet"}
    else:
        assert record.branch in {BRANCH, "main"}


def test_the_older_shapes_read_as_what_they_are():
    by_name = {shape.name: shape.body for shape in SHAPES}
    old_job = job_hook(by_name["job 15.x without project"])
    assert old_job is not None
    assert (old_job.project.id, old_job.project.path) == (PROJECT_ID, None)
    legacy = merge_request_hook(by_name["merge_request 8.x without project"])
    assert legacy is not None
    assert (legacy.project.id, legacy.project.path) == (None, None)
    assert legacy.updated_at == datetime(2016, 3, 1, 10, tzinfo=UTC)
    system = merge_request_hook(by_name["merge_request system hook"])
    assert system is not None
    assert (system.project.id, system.project.path) == (None, PROJECT)


@pytest.fixture
def items(sessions):
    """The MR item every shape speaks of (its project id recorded), and one elsewhere."""
    registry = mr_registry()
    item = make_item(
        sessions,
        registry,
        project=PROJECT,
        source_branch=BRANCH,
        mr_iid=IID,
        mr_sha=SHA,
        head_pipeline_id=PIPELINE,
    )
    elsewhere = make_item(
        sessions,
        registry,
        project="shapes/other",
        source_branch=BRANCH,
        mr_iid=IID,
        mr_sha=SHA,
        head_pipeline_id=PIPELINE + 100,
    )
    with sessions() as session:
        session.execute(
            sa.text("UPDATE mr_details SET project_id = :pid WHERE id = :id"),
            [{"pid": PROJECT_ID, "id": item}, {"pid": PROJECT_ID + 1, "id": elsewhere}],
        )
        session.commit()
    return item, elsewhere


def test_each_shape_reaches_the_item_it_names(sessions, items):
    item, _ = items
    for shape in SHAPES:
        resolver = MR_RESOLVERS.get(shape.kind or "")
        if resolver is None:
            assert not shape.reaches_item, shape.name
            continue
        with sessions() as session:
            found = resolver(session, shape.body)
            if shape.kind == "pipeline":
                assert resolve_pipeline(session, shape.body) == [], shape.name
        assert found == ([item] if shape.reaches_item else []), shape.name


def test_no_shape_is_answered_5xx_and_each_reaches_its_item(
    database_url, simulator, sessions, items
):
    item, _ = items
    answers = {}
    with webhook_app(database_url, simulator.url) as service:
        for shape in SHAPES:
            answer = simulator.send_webhook(
                service.url, shape.body, secret_token=NEW_SECRET, event=shape.header
            )
            answers[shape.name] = (answer.status_code, answer.json().get("status"))
        stored = pending(sessions)
    routed = {"merge_request", "pipeline", "build", "note", "push"}
    assert answers == {
        shape.name: (200, "accepted" if shape.kind in routed else "ignored") for shape in SHAPES
    }
    reached = sorted(event_type for item_id, event_type, _ in stored if item_id == item)
    assert reached == sorted(shape.kind for shape in SHAPES if shape.reaches_item)
    assert {item_id for item_id, _, _ in stored} == {item}
