"""`check_drift`: re-read an MR no webhook has spoken of for a while (lost or disabled hooks).

GitLab loses deliveries and disables hooks whose receiver failed a few times;
an item waiting for a Pipeline Hook or an approval would then wait forever.
So every active item whose MR exists has `needs_drift_check` deferred by
`drift_check_seconds`; every webhook applied to it pushes that deadline back
(`push_back_on_events`), and when it comes due the MR is read once:

| situation                                   | what happens                              |
|---------------------------------------------|-------------------------------------------|
| `drift_check_seconds` is 0                  | the dimension is cleared; never again     |
| no MR yet                                   | deferred (no GitLab call)                 |
| first run (no row yet: the item was just    | project id recorded (the cached project   |
|   set up by ensure_mr)                      |   read), deferred (no MR read)            |
| GitLab shows what the item already knows    | deferred                                  |
| GitLab shows news no webhook brought        | a *correction*: `needs_reconcile` raised, |
|   (`drift_corrections`)                     |   audited `drift_corrected`, deferred     |

Corrections are counted by kind: `merged`, `closed` (the MR's state),
`head` (its head is neither the service's commit nor a foreign head already
recorded or shown as `foreign_commits`; or it is the service's commit again
while `foreign_commits` is shown), `pipeline` (head pipeline id, sha or status), `approval` (the
status left `not_approved`) and `merge_status` (any other change of
`detailed_merge_status`). Answers from before GitLab 15.6 carry no detailed
status; only the state, head and pipeline are compared for them.

The waiting cost is one MR GET per item per `drift_check_seconds` (3600 /
`drift_check_seconds` an hour: 12 at the default 300 s), plus what
reconciling needs after a correction. With no active items nothing is
deferred, so the engine issues no SQL between safety sweeps.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import cast

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.models import MergeRequestInfo
from workqueue.queue import (
    DimensionStatus,
    DimensionUpdate,
    EventContext,
    EventHandler,
    EventResult,
    ExecutionContext,
    ItemTypeRegistration,
)
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.models import MRDimension, MRWorkItem

CORRECTION_KINDS = ("merged", "closed", "head", "pipeline", "approval", "merge_status")


class DriftCounts:
    """Drift checks and corrections made by this process (exported as counters)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._checks = 0
        self._corrections = dict.fromkeys(CORRECTION_KINDS, 0)

    def checked(self, corrections: list[str]) -> None:
        with self._lock:
            self._checks += 1
            for kind in corrections:
                self._corrections[kind] += 1

    def checks(self) -> Mapping[tuple[str, ...], float]:
        with self._lock:
            return {(): float(self._checks)}

    def corrections(self) -> Mapping[tuple[str, ...], float]:
        with self._lock:
            return {(kind,): float(count) for kind, count in self._corrections.items()}


def corrections(item: MRWorkItem, merge_request: MergeRequestInfo) -> list[str]:
    """What GitLab shows that the item does not know yet, by kind (see the module doc). Pure."""
    if merge_request.state in {"merged", "closed"}:
        return [merge_request.state]
    found = []
    # A head that is not the service's is already shown as foreign_commits: reconciling
    # again would only say so again (every period, for ever). Back on the service's
    # commit, that is news to reconcile.
    shown_foreign = (item.merge_blocker or {}).get("code") == "foreign_commits"
    refused = (item.merge_attempts or {}).get("rebase_refused")  # a conflict shown
    if merge_request.sha not in {item.mr_sha, item.foreign_head_sha, refused}:
        if not shown_foreign:
            found.append("head")
    elif shown_foreign and item.foreign_head_sha is None and merge_request.sha == item.mr_sha:
        found.append("head")
    seen = (item.head_pipeline_id, item.head_pipeline_sha, item.head_pipeline_status)
    shown = (
        merge_request.head_pipeline_id,
        merge_request.head_pipeline_sha,
        merge_request.head_pipeline_status,
    )
    if seen != shown:
        found.append("pipeline")
    status, known = merge_request.detailed_merge_status, item.detailed_merge_status
    if status is not None and status != known:
        found.append("approval" if known == "not_approved" else "merge_status")
    return found


class DriftCheck:
    """The `check_drift` executor, bound to one GitLab client."""

    def __init__(self, gitlab: GitLabClient, config: MRTypeConfig, counts: DriftCounts) -> None:
        self._gitlab = gitlab
        self._interval = timedelta(seconds=config.drift_check_seconds)
        self._counts = counts

    def check_drift(self, context: ExecutionContext) -> None:
        item = cast("MRWorkItem", context.item)
        if not self._interval:
            context.set_dimension(MRDimension.NEEDS_DRIFT_CHECK, DimensionStatus.FALSE)
            return
        first = context.dimensions.state_of(MRDimension.NEEDS_DRIFT_CHECK) is None
        if item.mr_iid is None:
            context.defer(MRDimension.NEEDS_DRIFT_CHECK, self._interval)
            return
        if first:
            # Just set up by ensure_mr, whose project read is cached: the id costs no call.
            if item.project_id is None:
                item.project_id = self._gitlab.project(item.project).id
            context.defer(MRDimension.NEEDS_DRIFT_CHECK, self._interval)
            return
        merge_request = self._gitlab.merge_request(item.project, item.mr_iid)
        if item.project_id is None:
            item.project_id = merge_request.target_project_id
        found = corrections(item, merge_request)
        self._counts.checked(found)
        if found:
            context.audit(
                "drift_corrected",
                reason="GitLab shows what no webhook reported: " + ", ".join(found),
                mr_iid=item.mr_iid,
                kinds=found,
                state=merge_request.state,
                head_pipeline_status=merge_request.head_pipeline_status,
                detailed_merge_status=merge_request.detailed_merge_status,
            )
            context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.TRUE)
        context.defer(MRDimension.NEEDS_DRIFT_CHECK, self._interval)


def push_back_on_events(registration: ItemTypeRegistration, config: MRTypeConfig) -> None:
    """Make every applied webhook push the item's drift check back by `drift_check_seconds`
    (call after the handlers are registered). Off (0): the handlers stay as they are."""
    if not config.drift_check_seconds:
        return
    delay = timedelta(seconds=config.drift_check_seconds)
    for event_type, handler in list(registration.event_handlers.items()):
        registration.event_handlers[event_type] = _pushing_back(handler, delay)


def _pushing_back(handler: EventHandler, delay: timedelta) -> EventHandler:
    def handle(context: EventContext) -> EventResult | None:
        result = handler(context)
        if result is None:
            return None
        if context.dimensions.state_of(MRDimension.NEEDS_DRIFT_CHECK) is None:
            return result  # the first check is still to come: it records the project id
        later = DimensionUpdate(
            MRDimension.NEEDS_DRIFT_CHECK,
            DimensionStatus.TRUE,
            pending_until=context.received_at + delay,
        )
        return dataclasses.replace(result, dimensions=(*result.dimensions, later))

    return handle
