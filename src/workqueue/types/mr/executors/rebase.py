"""Rebasing the service's own MR through GitLab's rebase API (`handled_types.mr.rebase`).

When GitLab says the MR needs a rebase (`need_rebase`: a fast-forward or
semi-linear project whose target moved on; or, for answers without a detailed
status, the project's merge method and `diverged_commits_count`), its head is
the service's own commit and `rebase: auto`, `reconcile_mr` asks GitLab to
rebase (`PUT …/rebase`) and looks again shortly. GitLab rebases in the
background; while `rebase_in_progress` the MR is `gitlab_checking`.

| after the rebase ran, GitLab shows                  | what happens                         |
|-----------------------------------------------------|--------------------------------------|
| a new head that `authorship.is_own_rebase` accepts  | it becomes `mr_sha` (audited         |
|   (one stamped commit of the service's user on the  |   `mr_rebased`): a new pipeline, then |
|   target) and that carries exactly the submitted    |   the merge                          |
|   content (`own_content`)                           |                                      |
| a new head it does not accept (a person's commit   | recorded as `foreign_head_sha`:       |
|   came along, or a person rebased)                  |   `foreign_commits`, never merged    |
| a stamped commit of the service's user whose        | `conflict` (`rebase_refused`), never  |
|   content differs (a file GitLab merged with the    |   merged; a resubmission pushes anew |
|   target's changes to it, or a forged commit)       |   over it                            |
| the same head, still needing a rebase               | `conflict` (GitLab's `merge_error`); |
|                                                     |   not asked again for this head      |

The service never resolves a conflict: the caller resubmits content for the new
target (`submit` answers `updated` even for identical content while the item is
`conflict` or `need_rebase`, and `ensure_mr` builds a new commit on the target).
With `rebase: off` the MR stays `need_rebase`.
"""

from __future__ import annotations

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.errors import PermanentGitLabError
from workqueue.gitlab.models import MergeRequestInfo
from workqueue.queue import ExecutionContext
from workqueue.types.mr.authorship import is_own_rebase
from workqueue.types.mr.executors.merge_attempts import MergeAttempts
from workqueue.types.mr.executors.merge_blockers import BlockerCode, MergeBlocker
from workqueue.types.mr.executors.own_content import content_mismatch
from workqueue.types.mr.models import MRWorkItem

# Merge methods that need the target head in the MR's source branch.
FAST_FORWARD_METHODS = frozenset({"ff", "rebase_merge"})
_NOT_ENQUEUED = 409  # another rebase holds the MR's lock
_NOT_ALLOWED = 403  # the branch cannot be pushed to (protected, gone)


class Rebases:
    """Asks GitLab to rebase the service's MRs and takes the rebased heads that are its own."""

    def __init__(self, gitlab: GitLabClient, *, auto: bool) -> None:
        self._gitlab = gitlab
        self._auto = auto

    def adopt(
        self,
        context: ExecutionContext,
        item: MRWorkItem,
        merge_request: MergeRequestInfo,
        attempts: MergeAttempts,
    ) -> bool:
        """After a rebase the service asked for: True when GitLab's new head is that
        rebase of the service's commit, now `mr_sha`. Another new head is recorded
        as someone else's."""
        head = merge_request.sha
        if (
            not attempts.rebase_requested
            or merge_request.rebase_in_progress
            or head is None
            or head in {item.mr_sha, item.foreign_head_sha, attempts.rebase_refused}
            or item.target_branch is None
        ):
            return False
        commit = self._gitlab.get_commit(item.project, head)
        added = self._gitlab.compare(item.project, item.target_branch, head).commit_shas
        own = is_own_rebase(
            commit,
            added_commits=added,
            item_id=item.id,
            content_hash=item.content_hash,
            service_user=self._gitlab.current_user(),
        )
        # Git lets a pusher write any author and message: what is merged must be the
        # submitted content itself (`own_content`), whoever made the commit.
        mismatch = (
            content_mismatch(self._gitlab, item.project, commit, item.file_actions) if own else None
        )
        if own and mismatch is None:
            context.audit(
                "mr_rebased", mr_iid=item.mr_iid, before=item.mr_sha, after=head, by="gitlab"
            )
            item.mr_sha = head
            # The pipeline recorded so far ran on the commit before the rebase.
            item.head_pipeline_id = item.head_pipeline_sha = item.head_pipeline_status = None
            return True
        if mismatch is not None:
            # GitLab merged a file with the target's own changes to it, or someone
            # rewrote the commit: not the submission, so a conflict to resubmit for.
            attempts.rebase_refused = head
            context.audit(
                "mr_rebase_refused",
                reason="the head after the rebase does not carry exactly the submitted "
                f"content ({mismatch}); not merging it",
                mr_iid=item.mr_iid,
                head=head,
            )
            return False
        item.foreign_head_sha = head
        context.audit(
            "mr_branch_foreign",
            reason="the head after the rebase is not the service's rebased commit; not merging it",
            foreign_head_sha=head,
            branch=item.source_branch,
        )
        return False

    def blocker(
        self,
        context: ExecutionContext,
        item: MRWorkItem,
        merge_request: MergeRequestInfo,
        attempts: MergeAttempts,
        blocker: MergeBlocker | None,
        *,
        merge_method: str | None,
    ) -> MergeBlocker | None:
        """What a rebase makes of `blocker`: the blocker to show instead, or None when
        no rebase is in question (then `blocker` stands). May ask GitLab to rebase."""
        after = _after_rebase(item, merge_request, attempts)
        if after is not None:
            return after
        if not _needs_rebase(merge_request, blocker, merge_method):
            return None
        head = merge_request.sha
        if head is None or head != item.mr_sha or item.foreign_head_sha is not None:
            return None  # not the service's commit: merge_blocker says so
        target = item.target_branch or merge_request.target_branch
        if not self._auto:
            return blocker or MergeBlocker(
                BlockerCode.NEED_REBASE,
                f"the project merges with {merge_method} and {target} moved on "
                "(rebase is off: resubmit)",
            )
        if attempts.rebase_requested:
            reason = merge_request.merge_error or "GitLab gave no reason"
            return MergeBlocker(
                BlockerCode.CONFLICT,
                f"GitLab could not rebase the MR onto {target}: {reason} (resubmit "
                "content for the new target)",
            )
        return self._request(context, item, attempts, head, target)

    def _request(
        self,
        context: ExecutionContext,
        item: MRWorkItem,
        attempts: MergeAttempts,
        head: str,
        target: str,
    ) -> MergeBlocker:
        """Ask GitLab to rebase `head` onto `target`; what to show meanwhile."""
        assert item.mr_iid is not None  # noqa: S101 - reconcile_mr checked it
        try:
            self._gitlab.rebase_merge_request(item.project, item.mr_iid)
        except PermanentGitLabError as error:
            if error.status == _NOT_ENQUEUED:
                return MergeBlocker(
                    BlockerCode.GITLAB_CHECKING,
                    f"GitLab could not start the rebase yet ({error.status}: {error.message})",
                    transient=True,
                )
            if error.status == _NOT_ALLOWED:
                return MergeBlocker(
                    BlockerCode.NEED_REBASE,
                    f"GitLab refused to rebase the MR ({error.status}: {error.message})",
                )
            raise
        attempts.rebase_requested = True
        context.audit("mr_rebase_requested", mr_iid=item.mr_iid, sha=head, target_branch=target)
        return MergeBlocker(
            BlockerCode.GITLAB_CHECKING,
            f"the service asked GitLab to rebase the MR onto {target}",
            transient=True,
        )


def _after_rebase(
    item: MRWorkItem, merge_request: MergeRequestInfo, attempts: MergeAttempts
) -> MergeBlocker | None:
    """What a rebase running, or one whose result was refused, shows; None otherwise."""
    if merge_request.rebase_in_progress:
        return MergeBlocker(
            BlockerCode.GITLAB_CHECKING, "GitLab is rebasing the MR", transient=True
        )
    if attempts.rebase_refused is not None and merge_request.sha == attempts.rebase_refused:
        return MergeBlocker(
            BlockerCode.CONFLICT,
            f"GitLab's rebase of the MR onto {item.target_branch} does not carry exactly "
            "the submitted content (resubmit content for the new target)",
        )
    return None


def _needs_rebase(
    merge_request: MergeRequestInfo, blocker: MergeBlocker | None, merge_method: str | None
) -> bool:
    if blocker is not None:
        return blocker.code is BlockerCode.NEED_REBASE
    # Answers without a detailed status (before GitLab 15.6) do not say need_rebase.
    return merge_method in FAST_FORWARD_METHODS and bool(merge_request.diverged_commits_count)
