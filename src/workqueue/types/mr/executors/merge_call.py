"""The merge itself: `PUT …/merge`, or adding to the merge train, and GitLab refusing either.

* **Refusals** (405, 406, 409, 422 on a merge; 400 and 409 on a train add, whose
  "not mergeable now" is a 400 `Failed to merge`) are `merge_refused` with
  GitLab's reason, retried after `merge_attempts.refusal_delay` (30 s doubling up
  to `merge_retry_max_seconds`). A 409 (the head is not the sha named) re-reads
  the MR first: a head that really moved is judged as such (someone else's
  commits, never retried); an unchanged head is a refusal like the others.
* **Merge trains.** On a project with merge trains the MR is added to the train
  naming the tested sha, and GitLab merges it when the train pipeline passes;
  meanwhile `in_merge_train`. A car GitLab dropped (its train pipeline failed,
  new commits, ...) is added once more after a new green pipeline; dropped again,
  the MR is `merge_refused` and not added again for that head.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.gitlab.models import MergeRequestInfo
from workqueue.queue import ExecutionContext
from workqueue.signals.config import ChecksConfig
from workqueue.types.mr.executors.merge_attempts import MAX_TRAIN_ADDS, MergeAttempts
from workqueue.types.mr.executors.merge_blockers import BlockerCode, MergeBlocker, merge_blocker
from workqueue.types.mr.executors.outcomes import finish_merged, record_observed
from workqueue.types.mr.models import MRWorkItem

# Refusals that mean "not now" (see GitLabClient.merge); 406 is pre-16 GitLab's 422.
MERGE_REFUSALS = frozenset({405, 406, 409, 422})
TRAIN_REFUSALS = frozenset({400, 409})
_HEAD_MOVED = 409
ACTIVE_CARS = frozenset({"idle", "stale", "fresh", "merging"})

# (what to show, how long until the next look; None: the default re-check, or none)
Verdict = tuple[MergeBlocker, timedelta | None]


class Merging:
    """Merge calls and their refusals, bound to one GitLab client and one backoff."""

    def __init__(
        self,
        gitlab: GitLabClient,
        *,
        retry_base: timedelta,
        retry_cap: timedelta,
        checks: ChecksConfig | None = None,
    ) -> None:
        self._gitlab = gitlab
        self._checks = checks or ChecksConfig()
        self._retry_base = retry_base
        self._retry_cap = retry_cap

    def train_state(
        self,
        context: ExecutionContext,
        item: MRWorkItem,
        merge_request: MergeRequestInfo,
        attempts: MergeAttempts,
    ) -> MergeBlocker | None:
        """While the car the service added may be on the train: what GitLab says of it.
        None: not on a train (never added, or just found dropped and may be re-added)."""
        if not attempts.in_train:
            return None
        assert item.mr_iid is not None  # noqa: S101 - reconcile_mr checked it
        car = self._gitlab.merge_train_car(item.project, item.mr_iid)
        if car is not None and car.status in ACTIVE_CARS:
            return MergeBlocker(
                BlockerCode.IN_MERGE_TRAIN,
                f"on the merge train of {car.target_branch} (car {car.status}); GitLab "
                "merges it when the train pipeline passes",
                transient=True,
            )
        if car is not None:  # merged or skip_merged: the MR's own answer follows
            return MergeBlocker(
                BlockerCode.GITLAB_CHECKING,
                f"GitLab's merge train says the MR is {car.status}",
                transient=True,
            )
        attempts.dropped(merge_request.head_pipeline_id, merge_request.head_pipeline_status)
        context.audit(
            "merge_train_dropped",
            reason="GitLab dropped the MR from the merge train",
            mr_iid=item.mr_iid,
            drops=attempts.train_drops,
            head_pipeline_id=merge_request.head_pipeline_id,
            head_pipeline_status=merge_request.head_pipeline_status,
        )
        return self.train_gate(merge_request, attempts)

    @staticmethod
    def train_gate(merge_request: MergeRequestInfo, attempts: MergeAttempts) -> MergeBlocker | None:
        """Why the MR may not be added to the train now, after drops; None: it may."""
        pipeline = (merge_request.head_pipeline_id, merge_request.head_pipeline_status)
        if attempts.may_add_to_train(*pipeline):
            return None
        if attempts.train_drops >= MAX_TRAIN_ADDS:
            return MergeBlocker(
                BlockerCode.MERGE_REFUSED,
                f"GitLab dropped the MR from the merge train {attempts.train_drops} times; "
                "the service does not add it again (a new commit starts anew)",
            )
        return MergeBlocker(
            BlockerCode.MERGE_REFUSED,
            "GitLab dropped the MR from the merge train; it is added again after a new "
            "green pipeline",
        )

    def merge(
        self,
        context: ExecutionContext,
        item: MRWorkItem,
        attempts: MergeAttempts,
        now: datetime,
        *,
        train: bool,
    ) -> Verdict | None:
        """Merge the recorded head (or add it to the train). None: merged, item completed."""
        assert item.mr_iid is not None  # noqa: S101 - reconcile_mr checked it
        assert item.mr_sha is not None  # noqa: S101 - merge_blocker checked it
        sha = item.mr_sha
        refusals = TRAIN_REFUSALS | MERGE_REFUSALS if train else MERGE_REFUSALS
        try:
            if train:
                self._gitlab.add_to_merge_train(item.project, item.mr_iid, sha=sha)
            else:
                merged = self._gitlab.merge(item.project, item.mr_iid, sha=sha)
        except PermanentGitLabError as error:
            if error.status not in refusals:
                raise
            return self._refused(context, item, attempts, error, now)
        if train:
            attempts.in_train = True
            context.audit(
                "merge_train_added", mr_iid=item.mr_iid, sha=sha, adds=attempts.train_drops + 1
            )
            return (
                MergeBlocker(
                    BlockerCode.IN_MERGE_TRAIN,
                    f"added to the merge train of {item.target_branch}",
                    transient=True,
                ),
                None,
            )
        if merged.state != "merged":
            record_observed(context, item, merged)
            left = MergeBlocker(
                BlockerCode.GITLAB_CHECKING,
                f"the merge left the MR {merged.state or 'in a state GitLab did not name'}",
                transient=True,
            )
            return left, None
        context.audit("mr_merged", mr_iid=item.mr_iid, sha=sha, merge_sha=merged.merge_commit_sha)
        finish_merged(context, item, "the service merged the MR", merged, self._checks)
        return None

    def _refused(
        self,
        context: ExecutionContext,
        item: MRWorkItem,
        attempts: MergeAttempts,
        error: PermanentGitLabError,
        now: datetime,
    ) -> Verdict:
        context.audit(
            "merge_refused", reason=error.message, status=error.status, mr_iid=item.mr_iid
        )
        if error.status == _HEAD_MOVED:
            assert item.mr_iid is not None  # noqa: S101 - merge() checked it
            reread = self._gitlab.merge_request(item.project, item.mr_iid)
            if reread.sha != item.mr_sha or reread.state != "opened":
                # The head really moved (or the MR changed state): judge what is there now.
                record_observed(context, item, reread)
                moved = merge_blocker(item, reread) or MergeBlocker(
                    BlockerCode.GITLAB_CHECKING, f"the MR is {reread.state}", transient=True
                )
                return moved, None
        delay = attempts.refused(error.message, now, self._retry_base, self._retry_cap)
        context.audit(
            "merge_retry_scheduled",
            mr_iid=item.mr_iid,
            refusals=attempts.refusals,
            retry_in_seconds=delay.total_seconds(),
        )
        return refused_blocker(attempts), delay


def refused_blocker(attempts: MergeAttempts) -> MergeBlocker:
    """`merge_refused` with GitLab's last reason; the backoff decides when to look again."""
    return MergeBlocker(
        BlockerCode.MERGE_REFUSED, attempts.refusal or "GitLab refused the merge", transient=True
    )
