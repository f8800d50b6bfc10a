"""`ensure_mr`: bring the bot branch and its MR to exactly the submitted content.

Like every executor of the `mr` type it changes state and calls GitLab; it never commits.

GitLab errors arrive already classified by the adapter: a
`PermanentGitLabError` fails the item at once with GitLab's own message, a
`RetryableGitLabError` is retried by the engine's backoff (one retry policy,
DDR-14); nothing here retries on its own.
"""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import cast

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.models import BranchInfo, CommitInfo, MergeRequestInfo, ProjectInfo
from workqueue.queue import DimensionStatus, ExecutionContext, PermanentError
from workqueue.types.mr import repository as mr_repository
from workqueue.types.mr.authorship import (
    BranchMRs,
    is_own_head,
    sort_open_mrs,
    stamp,
    stamped_content,
    stamped_item,
)
from workqueue.types.mr.config import CI_CONFIG_PATH_ENTRY, MRTypeConfig
from workqueue.types.mr.executors.metadata import MRMetadata, SetMetadata, plan_update
from workqueue.types.mr.executors.outcomes import finish_empty
from workqueue.types.mr.executors.own_content import content_mismatch
from workqueue.types.mr.models import MRDimension, MRWorkItem
from workqueue.types.mr.validation.content_rules import ci_config_files
from workqueue.types.mr.validation.policy import target_problem


class _Branch(enum.Enum):
    """What ensure_mr found at the source branch before pushing."""

    ABSENT = "absent"  # no such branch: the service may create it
    OURS = "ours"  # its head is the service's commit for this owner's item
    FOREIGN_RECORDED = "foreign"  # someone else's head, recorded in this step


class EnsureMR:
    """The `ensure_mr` executor, bound to one GitLab client (one per configured GitLab instance)."""

    def __init__(self, gitlab: GitLabClient, config: MRTypeConfig | None = None) -> None:
        self._gitlab = gitlab
        config = config or MRTypeConfig()
        self._config = config
        self._empty_check_interval = timedelta(seconds=config.empty_check_interval_seconds)

    def ensure_mr(self, context: ExecutionContext) -> None:
        """Bring the bot branch and its MR to exactly the submitted content.

        The branch is rebuilt as ONE commit on top of the target branch
        (`start_branch` + `force`), so it never accumulates old attempts. Its
        message is the caller's, stamped with the item's trailer (see
        `authorship`). An open MR of the service's for the branch is reused: a
        crash between the commit and the MR creation must not produce a second MR.

        Nothing is written to GitLab unless it is safe:

        * the source branch must be neither the target nor the project's
          default branch (permanent failure);
        * the branch must not exist, or its head must be the service's own
          commit for this item. Otherwise the foreign head is recorded in
          `foreign_head_sha` and the item fails naming it; a resubmission or a
          retry looks again and fails again while it is there. The record is
          cleared once the head is the service's again or the branch is gone;
        * no open MR from the branch may be someone else's (permanent failure):
          the service never edits, merges or closes a person's MR.

        GitLab's commit API cannot make the force-push conditional on the head
        just read, so a push landing in the milliseconds between that read and
        the commit would still be replaced; the push hook then records it.

        Afterwards `reconcile_mr` is due at once (look at the new head) and the
        periodic empty-diff check one interval from now (this run just checked).
        """
        item = cast("MRWorkItem", context.item)
        if item.contents_dropped_at is not None:
            # Retry and resubmission refuse or replace such an item; never push empty files.
            raise PermanentError("its file contents were dropped after retention.content_days")
        gitlab = self._gitlab
        project = gitlab.project(item.project)
        target = _checked_target(item, project)
        refused = target_problem(target, self._config)
        if refused is not None:
            # A default branch the policy could not see at submission time.
            raise PermanentError(f"target branch {target}: {refused.message}")
        self._refuse_ci_config(item, project)
        branch, head = self._branch_state(context, item)
        if branch is _Branch.FOREIGN_RECORDED:
            # The foreign head is recorded in this step; needs_mr stays raised,
            # so the next step fails the item through the engine (PermanentError).
            return
        branch_mrs = self._branch_mrs(item, project, target)
        if branch is _Branch.ABSENT:
            self._refuse_strangers_mrs(context, item, branch_mrs)

        commit = self._unrecorded_push(item, head) or gitlab.commit(
            item.project,
            branch=item.source_branch,
            start_branch=target,
            message=stamp(item.commit_message, item.id, item.content_hash),
            actions=item.file_actions,
            force=True,
        )
        if commit.sha != item.mr_sha:
            # The pipeline recorded so far ran on the previous head.
            item.head_pipeline_id = item.head_pipeline_sha = item.head_pipeline_status = None
        item.mr_sha = commit.sha

        if not gitlab.compare(item.project, target, item.source_branch).differs:
            finish_empty(gitlab, context, item, [mr.iid for mr in branch_mrs.own])
            return

        if branch_mrs.own:
            merge_request = self._sync_metadata(context, item, branch_mrs.own[0])
        else:
            merge_request = gitlab.create_merge_request(
                item.project,
                source_branch=item.source_branch,
                target_branch=target,
                title=item.title,
                description=item.description or "",
                labels=list(item.labels),
                remove_source_branch=True,
            )
            remembered = SetMetadata.of(_metadata(merge_request), item.labels)
            item.mr_metadata_set = remembered.stored()
        item.mr_iid = merge_request.iid
        item.mr_url = merge_request.web_url
        item.detailed_merge_status = merge_request.detailed_merge_status
        context.set_dimension(MRDimension.NEEDS_MR, DimensionStatus.FALSE)
        context.set_dimension(MRDimension.NEEDS_RECONCILE, DimensionStatus.TRUE)
        context.defer(MRDimension.NEEDS_EMPTY_CHECK, self._empty_check_interval)
        context.audit("mr_ensured", mr_iid=merge_request.iid, sha=commit.sha)

    def _refuse_ci_config(self, item: MRWorkItem, project: ProjectInfo) -> None:
        """The CI configuration file as GitLab names it now, not at submission: a retry
        or a re-push after `ci_config_path` changed must not write it either."""
        if CI_CONFIG_PATH_ENTRY not in self._config.path_blocklist:
            return
        files = ci_config_files(project.ci_config_path, project.path_with_namespace)
        blocked = {file.casefold() for file in files}
        for action in item.file_actions:
            for field in ("file_path", "previous_path"):
                path = action.get(field)
                if isinstance(path, str) and path.casefold() in blocked:
                    raise PermanentError(
                        f"{path} is the project's CI configuration file (GitLab's "
                        f"ci_config_path is {project.ci_config_path or 'unset'}), blocked by "
                        f"the path_blocklist entry '{CI_CONFIG_PATH_ENTRY}'"
                    )

    def _branch_state(
        self, context: ExecutionContext, item: MRWorkItem
    ) -> tuple[_Branch, BranchInfo | None]:
        """ABSENT or OURS: the service may push. FOREIGN_RECORDED: a foreign head was
        just recorded. Raises when the recorded foreign head is still there. The head
        read comes along."""
        head = self._gitlab.branch(item.project, item.source_branch)
        ours = head is None or head.sha == item.mr_sha or self._stamped_by_us(context, item, head)
        if ours:
            if item.foreign_head_sha is not None:
                context.audit(
                    "mr_branch_reclaimed",
                    reason="the bot branch is gone or holds the service's commit again",
                    foreign_head_sha=item.foreign_head_sha,
                    branch=item.source_branch,
                )
                item.foreign_head_sha = None
            return (_Branch.ABSENT if head is None else _Branch.OURS), head
        assert head is not None  # noqa: S101 - an absent branch is ours
        if item.foreign_head_sha != head.sha:
            item.foreign_head_sha = head.sha
            context.audit(
                "mr_branch_foreign",
                reason="the bot branch has commits the service did not make; not pushing",
                foreign_head_sha=head.sha,
                branch=item.source_branch,
            )
            return _Branch.FOREIGN_RECORDED, head
        # The sha, not who made it: callers may read the error, and a
        # committer's email is not theirs to learn.
        raise PermanentError(
            f"branch {item.source_branch} has commits the service did not make (head "
            f"{head.sha}); nothing was pushed over them. Delete the branch or move it "
            "back to the service's commit, then retry or resubmit"
        )

    def _unrecorded_push(self, item: MRWorkItem, head: BranchInfo | None) -> CommitInfo | None:
        """The head, when it is this very push already made: a step that pushed and then
        died (or lost its database, or the answer to its next call) before recording
        `mr_sha` is retried, and pushing the same content again would put a second
        commit on the branch. The head must be the service's own (checked before), carry
        this item's stamp and this content's hash. Had the step not died, the MR would
        sit on that commit, so a target that moved since changes nothing; new content
        has another hash and gets a fresh commit."""
        if head is None or head.sha == item.mr_sha:
            return None  # nothing pushed, or a deliberate re-run over the recorded push
        message = head.commit.message
        if stamped_item(message) != item.id or stamped_content(message) != item.content_hash:
            return None
        # The stamp and the author are whatever the pusher wrote: a commit dressed up as
        # this push must also carry exactly its content, else it is pushed over.
        if content_mismatch(self._gitlab, item.project, head.commit, item.file_actions):
            return None
        return head.commit

    def _stamped_by_us(self, context: ExecutionContext, item: MRWorkItem, head: BranchInfo) -> bool:
        # Only asked when the head is not the recorded push (a crash lost the
        # record, or it is someone else's): the lookups stay off the common path.
        if stamped_item(head.commit.message) is None:
            return False
        return is_own_head(
            head.commit,
            last_pushed=item.mr_sha,
            item_ids=mr_repository.own_generation_ids(context.session, item),
            service_user=self._gitlab.current_user(),
        )

    @staticmethod
    def _refuse_strangers_mrs(
        context: ExecutionContext, item: MRWorkItem, branch_mrs: BranchMRs
    ) -> None:
        """The branch is gone but the service's user has an open MR from it: adopt it
        only when an item of this owner recorded it, never another caller's MR.

        (While the branch exists, the head check already decided: an MR showing
        the service's own commit for this owner is this owner's.)
        """
        known = mr_repository.own_generation_mr_iids(context.session, item)
        strangers = [mr.iid for mr in branch_mrs.own if mr.iid not in known]
        if strangers:
            listed = ", ".join(f"!{iid}" for iid in strangers)
            raise PermanentError(
                f"branch {item.source_branch} has open merge requests ({listed}) that the "
                "service opened for another caller's item; it does not take them over. "
                "Close them or submit with another source_branch"
            )

    def _branch_mrs(self, item: MRWorkItem, project: ProjectInfo, target: str) -> BranchMRs:
        """The open MRs of the branch; raises when one of them is someone else's."""
        branch_mrs = sort_open_mrs(
            self._gitlab.open_merge_requests(item.project, item.source_branch),
            project_id=project.id,
            target_branch=target,
            service_user=self._gitlab.current_user(),
        )
        if branch_mrs.foreign:
            names = ", ".join(f"!{mr.iid} by {mr.author_username}" for mr in branch_mrs.foreign)
            raise PermanentError(
                f"branch {item.source_branch} has open merge requests the service did not "
                f"open ({names}); it does not push to, edit, merge or close them. Close "
                "them or submit with another source_branch"
            )
        return branch_mrs

    def _sync_metadata(
        self, context: ExecutionContext, item: MRWorkItem, merge_request: MergeRequestInfo
    ) -> MergeRequestInfo:
        """Bring the MR's title, description and labels to the submission's where no
        person changed what the service set (`mr_metadata`); each edit kept is audited."""
        before = SetMetadata.from_stored(item.mr_metadata_set)
        wanted = MRMetadata(item.title, item.description or "", tuple(item.labels))
        plan = plan_update(before, _metadata(merge_request), wanted)
        for kept in plan.kept:
            details: dict[str, object] = {"mr_iid": merge_request.iid, "field": kept.field}
            if kept.field == "labels":
                details["added_by_people"] = list(kept.added_by_people)
                details["removed_by_people"] = list(kept.removed_by_people)
            context.audit("metadata_kept", kept.message, **details)
        if plan.changes:
            merge_request = self._gitlab.update_merge_request(
                item.project, merge_request.iid, **plan.changes
            )
        item.mr_metadata_set = plan.remembered(before, _metadata(merge_request)).stored()
        return merge_request


def _metadata(merge_request: MergeRequestInfo) -> MRMetadata:
    return MRMetadata(merge_request.title, merge_request.description, merge_request.labels)


def _checked_target(item: MRWorkItem, project: ProjectInfo) -> str:
    """The target branch (the project default when none was given), refusing a source
    branch that is the target or the default branch: it would be force-pushed."""
    if item.target_branch is None:
        if project.default_branch is None:
            raise PermanentError(f"project {item.project} has an empty repository")
        item.target_branch = project.default_branch
    target = item.target_branch
    if item.source_branch == target:
        raise PermanentError(
            f"source branch {item.source_branch} is the target branch; the service "
            "force-pushes its source branch, so it must be another branch"
        )
    if item.source_branch == project.default_branch:
        raise PermanentError(
            f"source branch {item.source_branch} is the default branch of {item.project}; "
            "the service force-pushes its source branch, so it must be another branch"
        )
    return target
