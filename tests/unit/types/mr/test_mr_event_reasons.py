"""The reasons the `mr` event handlers give say what a hook left out, never `None`.

Hook bodies come from outside: any optional field may be missing. The reason
is what the audit trail and the history show a person.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from workqueue.queue.contract import EventContext, EventResult
from workqueue.queue.dimensions import Dimensions
from workqueue.queue.models import Phase
from workqueue.types.mr.events import on_job, on_merge_request, on_pipeline
from workqueue.types.mr.models import MRWorkItem

HEAD = "c3e5a7b9d1f3e5a7c9b1d3f5e7a9c1b3d5f7e9a1"
PROJECT = {"id": 42, "path_with_namespace": "acme/widgets", "default_branch": "main"}
NOW = datetime(2025, 3, 1, 11, tzinfo=UTC)
PRINTED_NONE = re.compile(r"\bNone\b")


def _item() -> MRWorkItem:
    return MRWorkItem(
        id=uuid.UUID("0b5f6a4e-7c1d-4e2a-9f3b-8d6c5a4b3e21"),
        item_type="mr",
        phase=Phase.ACTIVE,
        project="acme/widgets",
        project_path="acme/widgets",
        source_branch="workqueue/bump-requests",
        target_branch="main",
        title="Bump requests",
        commit_message="Sync dependencies",
        file_actions=[],
        content_hash="sha256:x",
        mr_iid=7,
        mr_sha=HEAD,
        head_pipeline_id=5511,
        head_pipeline_sha=HEAD,
    )


def _reason(handler: Any, body: dict[str, Any]) -> str:
    context = EventContext(
        session=None,  # type: ignore[arg-type]  # handlers never touch it
        item=_item(),
        dimensions=Dimensions([], NOW),
        event_type=str(body["object_kind"]),
        body=body,
        received_at=NOW,
    )
    result = handler(context)
    assert isinstance(result, EventResult)
    assert result.reason
    return result.reason


MERGE_WITHOUT_STATE = {
    "object_kind": "merge_request",
    "project": PROJECT,
    "object_attributes": {"iid": 7, "action": "merge"},  # no state, no user
}
PIPELINE_WITHOUT_STATUS = {
    "object_kind": "pipeline",
    "project": PROJECT,
    "object_attributes": {"id": 5512, "ref": "workqueue/bump-requests", "sha": HEAD},
    "merge_request": {"iid": 7, "source_branch": "workqueue/bump-requests"},
    "builds": [],
}
JOB_WITHOUT_ID_OR_REASON = {
    "object_kind": "build",
    "project": PROJECT,
    "sha": HEAD,
    "build_name": "unit-tests",
    "build_status": "failed",
    "pipeline_id": 5511,
}


@pytest.mark.parametrize(
    ("handler", "body", "expected"),
    [
        (on_merge_request, MERGE_WITHOUT_STATE, "MR !7: merge; confirming with GitLab"),
        (on_pipeline, PIPELINE_WITHOUT_STATUS, "pipeline 5512 sent no status"),
        (
            on_job,
            JOB_WITHOUT_ID_OR_REASON,
            "job unit-tests of pipeline 5511 failed: unknown_failure",
        ),
    ],
)
def test_a_missing_field_is_left_out_of_the_reason(handler, body, expected):
    reason = _reason(handler, body)
    assert not PRINTED_NONE.search(reason), reason
    assert reason == expected
