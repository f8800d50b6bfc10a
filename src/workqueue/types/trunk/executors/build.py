"""The one GitLab pipeline of an admitted head: found if it exists, triggered if not.

GitLab has no idempotency key for `POST /projects/:id/pipeline`, and a worker
can die between the trigger and the commit that records its id. So before
every trigger the service looks for a pipeline it already made for the head:
API pipelines of the branch updated since the admission (minus a clock-skew
margin) that no head owns yet and that are newer than any pipeline of an
earlier validation of the head (before a retry), whose
variables are exactly the ones the service triggers with (`WORKQUEUE_TRUNK_REQUEST`,
`WORKQUEUE_TRUNK_SHA`, `WORKQUEUE_BUILD_STRATEGY`, `WORKQUEUE_BASE_SHA` and the
queue's own, nothing more). Admission is committed
before this runs (a step of its own), so the strategy and base a found
pipeline carries are always the recorded ones.

Only a pipeline that does not exist yet needs the head to still be on its
branch (`branch_heads.read_place`): the pipeline runs on the branch, with its
protected variables and runners, and checks out `WORKQUEUE_TRUNK_SHA`, so a
sha the branch no longer holds (force-pushed away) is never built there. A
pipeline found again was triggered after that same check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.orm import Session

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.models import PipelineInfo
from workqueue.types.trunk import repository
from workqueue.types.trunk.branch_heads import BranchPlace, read_place
from workqueue.types.trunk.config import TrunkQueueConfig
from workqueue.types.trunk.models import TrunkWorkItem

REQUEST_VARIABLE = "WORKQUEUE_TRUNK_REQUEST"
SHA_VARIABLE = "WORKQUEUE_TRUNK_SHA"
STRATEGY_VARIABLE = "WORKQUEUE_BUILD_STRATEGY"
BASE_VARIABLE = "WORKQUEUE_BASE_SHA"
TRIGGER_SOURCE = "api"  # what GitLab records as the source of an API-created pipeline
# The database's clock (admitted_at) and GitLab's (updated_at) may disagree.
CLOCK_SKEW = timedelta(minutes=10)


def pipeline_variables(item: TrunkWorkItem, queue: TrunkQueueConfig) -> dict[str, str]:
    """The queue's own variables, then the service's (which the config cannot override)."""
    return {
        **queue.variables,
        REQUEST_VARIABLE: str(item.id),
        SHA_VARIABLE: item.sha,
        STRATEGY_VARIABLE: "" if item.build_strategy is None else str(item.build_strategy),
        BASE_VARIABLE: item.base_sha or "",
    }


def existing_pipeline(
    session: Session, client: GitLabClient, item: TrunkWorkItem, queue: TrunkQueueConfig
) -> PipelineInfo | None:
    """A pipeline already triggered for this head (by a step whose commit was lost)."""
    if item.admitted_at is None:
        return None
    candidates = client.pipelines_since(
        queue.project,
        ref=queue.branch,
        source=TRIGGER_SOURCE,
        updated_after=item.admitted_at - CLOCK_SKEW,
    )
    owned = repository.pipelines_recorded(session, [pipeline.id for pipeline in candidates])
    retired = item.retired_pipeline_id or 0
    for pipeline in candidates:
        if pipeline.id in owned or pipeline.id <= retired:
            continue
        variables = client.pipeline_variables(queue.project, pipeline.id)
        if carries_the_heads_request(variables, item, queue):
            return pipeline
    return None


def carries_the_heads_request(
    variables: Mapping[str, str], item: TrunkWorkItem, queue: TrunkQueueConfig
) -> bool:
    """Whether a pipeline's variables are exactly the service's for this head: its id,
    sha, strategy and base, the queue's own variables, and nothing else. Anyone allowed
    to run pipelines on the branch can set a head's request id; adopting such a pipeline
    would let its result (for another sha, an older base, a queue variable changed, or
    one more variable the project's CI reads to skip its work) make this head green."""
    return dict(variables) == pipeline_variables(item, queue)


@dataclass(frozen=True, slots=True)
class Build:
    """What making sure of the head's pipeline did."""

    pipeline: PipelineInfo | None  # None: nothing built, the head left its branch
    triggered: bool  # False: found again (or not built)
    place: BranchPlace | None = None  # read before a trigger; None when found again


def ensure_pipeline(
    session: Session, client: GitLabClient, item: TrunkWorkItem, queue: TrunkQueueConfig
) -> Build:
    """The head's pipeline: found again, else triggered if the head is still on its branch."""
    found = existing_pipeline(session, client, item, queue)
    if found is not None:
        return Build(found, triggered=False)
    place = read_place(client, queue, item.sha)
    if not place.place.on_branch:
        return Build(None, triggered=False, place=place)
    triggered = client.trigger_pipeline(
        queue.project, ref=queue.branch, variables=pipeline_variables(item, queue)
    )
    return Build(triggered, triggered=True, place=place)
