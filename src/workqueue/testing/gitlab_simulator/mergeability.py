"""Merge request mergeability, merging and auto-merge (rebasing: `rebasing`).

The checks follow `MergeRequest.mergeable_state_checks` (open, draft, commits,
discussions, CI) plus EE's approval, requested-changes and other checks, then the
git checks (`conflict`, `need_rebase`). Before any of them, an MR still being
prepared or checked reports `preparing`, `unchecked`, `checking` or
`approvals_syncing`.
The merge endpoint answers 405 when a state check fails and 422 when only a git
check fails, as `lib/api/merge_requests.rb` does.

Merge methods (a project setting, as in GitLab): `merge` creates a merge commit
even when a fast-forward is possible (GitLab's `--no-ff`); `rebase_merge` does
the same but needs the source to contain the target head; `ff` fast-forwards the
target and leaves `merge_commit_sha` null. `squash` first squashes the MR's
changes into one commit on top of the merge base.
"""

from __future__ import annotations

from typing import Any

from workqueue.testing.gitlab_simulator.ci import ACTIVE_STATUSES, head_pipeline, pipeline_status
from workqueue.testing.gitlab_simulator.errors import api_error
from workqueue.testing.gitlab_simulator.merge3 import merge_trees
from workqueue.testing.gitlab_simulator.state import MergeRequest, Project, SimulatorState, User


def ci_check(state: SimulatorState, project: Project, mr: MergeRequest) -> str | None:
    """`CheckCiStatusService` with the active-pipeline refinement of the detailed status."""
    if not project.only_allow_merge_if_pipeline_succeeds:
        return None
    pipeline = head_pipeline(state, project, mr)
    if pipeline is None:
        return "ci_must_pass"
    status = pipeline_status(state, pipeline)
    if status == "success" or (status == "skipped" and project.allow_merge_on_skipped_pipeline):
        return None
    return "ci_still_running" if status in ACTIVE_STATUSES else "ci_must_pass"


def state_check(
    state: SimulatorState, project: Project, mr: MergeRequest, *, skip_ci: bool = False
) -> str | None:
    """The first failing `mergeable_state?` check, as a `detailed_merge_status` value."""
    if mr.state != "opened":
        return "not_open"
    if mr.draft:
        return "draft_status"
    repo = project.repository
    source = repo.branches.get(mr.source_branch)
    target = repo.branches.get(mr.target_branch)
    if source is None or target is None or repo.is_ancestor(source, target):
        return "commits_status"
    if project.only_allow_merge_if_all_discussions_are_resolved and mr.unresolved_discussions:
        return "discussions_not_resolved"
    if not skip_ci and (failure := ci_check(state, project, mr)) is not None:
        return failure
    return review_check(project, mr)


def review_check(project: Project, mr: MergeRequest) -> str | None:
    """EE's checks after CI: approvals, requested changes, then anything not modelled."""
    if len(mr.approved_by) < project.approvals_required:
        return "not_approved"
    if mr.changes_requested_by:
        return "requested_changes"
    return mr.blocked_status


def git_check(project: Project, mr: MergeRequest) -> str | None:
    """`mergeable_git_state?`: conflicts, then the fast-forward requirement."""
    repo = project.repository
    target = repo.branches.get(mr.target_branch)
    if target is None or mr.sha not in repo.commits:
        return None
    if conflicting_paths(project, mr):
        return "conflict"
    needs_ff = project.merge_method in {"ff", "rebase_merge"}
    if needs_ff and not repo.is_ancestor(target, mr.sha):
        return "need_rebase"
    return None


def conflicting_paths(project: Project, mr: MergeRequest) -> list[str]:
    repo = project.repository
    target = repo.branches.get(mr.target_branch)
    if target is None or mr.sha not in repo.commits:
        return []
    head = mr.sha
    return list(repo.memo("conflicts", (target, head), lambda: _conflicts(project, target, head)))


def _conflicts(project: Project, target: str, head: str) -> tuple[str, ...]:
    # Depends only on the two commits (and their merge base), so it is memoised by sha:
    # a moved target branch or a new source head is a new key, never a stale answer.
    repo = project.repository
    base = repo.merge_base(target, head)
    base_tree = repo.commits[base].tree if base is not None else {}
    _, conflicts = merge_trees(base_tree, repo.commits[target].tree, repo.commits[head].tree)
    return tuple(conflicts)


def detailed_merge_status(state: SimulatorState, project: Project, mr: MergeRequest) -> str:
    if mr.state == "opened" and mr.prepared_at is None:
        return "preparing"
    if mr.state == "opened" and mr.unchecked_reads > 0:
        return "unchecked"
    if mr.state == "opened" and mr.checks_pending > 0:
        return "checking"
    if mr.state == "opened" and mr.approvals_syncing_reads > 0:
        return "approvals_syncing"
    return state_check(state, project, mr) or git_check(project, mr) or "mergeable"


def merge_status(project: Project, mr: MergeRequest) -> str:
    """The deprecated `merge_status` (git mergeability only)."""
    if mr.state == "opened" and mr.prepared_at is None:
        return "unchecked"
    if mr.state == "opened" and mr.checks_pending > 0:
        return "checking"
    if mr.state == "opened" and conflicting_paths(project, mr):
        return "cannot_be_merged"
    return "can_be_merged"


def blocking_discussions_resolved(project: Project, mr: MergeRequest) -> bool:
    """`mergeable_discussions_state?`: false only while the project requires resolved
    threads and some are not (what pre-15.6 answers give instead of a status)."""
    return not (
        project.only_allow_merge_if_all_discussions_are_resolved and mr.unresolved_discussions
    )


def default_merge_message(project: Project, mr: MergeRequest) -> str:
    return (
        f"Merge branch '{mr.source_branch}' into '{mr.target_branch}'\n\n{mr.title}\n\n"
        f"See merge request {project.path_with_namespace}!{mr.iid}"
    )


def perform_merge(
    state: SimulatorState,
    project: Project,
    mr: MergeRequest,
    user: User,
    params: dict[str, Any],
) -> None:
    """`MergeRequests::MergeService`: write the target branch, then mark the MR merged."""
    repo = project.repository
    target = repo.branches[mr.target_branch]
    base = repo.merge_base(target, mr.sha)
    base_tree = repo.commits[base].tree if base is not None else {}
    now = state.now()
    head = mr.sha
    if mr.squash:
        squashed = repo.create_commit(
            tree=repo.commits[mr.sha].tree,
            parent_ids=(base,) if base is not None else (),
            message=str(params.get("squash_commit_message") or mr.title),
            author=mr.author.signature,
            committer=user.signature,
            when=now,
        )
        mr.squash_commit_sha = head = squashed.id
    if project.merge_method == "ff":
        new_target = head
        mr.merge_commit_sha = None
    else:
        tree, conflicts = merge_trees(base_tree, repo.commits[target].tree, repo.commits[head].tree)
        if conflicts:
            raise api_error(422, "Branch cannot be merged")
        merge_commit = repo.create_commit(
            tree=tree,
            parent_ids=(target, head),
            message=str(params.get("merge_commit_message") or default_merge_message(project, mr)),
            author=user.signature,
            committer=user.signature,
            when=now,
        )
        new_target = mr.merge_commit_sha = merge_commit.id
    mr.state = "merged"
    mr.merged_at = mr.updated_at = now
    mr.merge_user = user
    mr.merge_when_pipeline_succeeds = False
    mr.merge_error = None
    remove = params.get("should_remove_source_branch")
    if remove is not None:
        mr.should_remove_source_branch = bool(remove)
    state.set_branch(project, mr.target_branch, new_target, user)
    if mr.should_remove_source_branch or mr.force_remove_source_branch:
        state.set_branch(project, mr.source_branch, None, user)
    state.add_system_note(mr, user, "merged")


def process_auto_merges(state: SimulatorState, project: Project) -> None:
    """Merge every MR whose auto-merge was waiting for a pipeline that has now passed."""
    for mr in list(project.merge_requests.values()):
        if mr.state != "opened" or not mr.merge_when_pipeline_succeeds or mr.merge_user is None:
            continue
        if mr.auto_merge_params.get("auto_merge_strategy") == "merge_train":
            continue  # the train merges it (`trains`)
        pipeline = head_pipeline(state, project, mr)
        if pipeline is None or pipeline_status(state, pipeline) != "success":
            continue
        if state_check(state, project, mr) is None and git_check(project, mr) is None:
            perform_merge(state, project, mr, mr.merge_user, dict(mr.auto_merge_params))
