"""Rebasing a merge request, in the background as GitLab does.

`PUT …/rebase` only enqueues the rebase (`MergeRequest#rebase_async`) and answers
202 `{"rebase_in_progress": true}`; `RebaseWorker` runs it later. Here the rebase
runs after `SimulatorState.rebase_reads` API reads of the MR (each of which shows
`rebase_in_progress: true` when asked with `include_rebase_in_progress`), or when
a test calls `finish_rebase`. It replays the MR's own commits on the target head
as the user who asked (their committer, the original authors and messages); a
commit that does not apply leaves the branch alone and sets `merge_error` to
GitLab's "Rebase failed. Please rebase locally", as does a failure a test asks
for with `fail_next_rebase`.
"""

from __future__ import annotations

from workqueue.testing.gitlab_simulator.merge3 import merge_trees
from workqueue.testing.gitlab_simulator.state import MergeRequest, Project, SimulatorState, User

REBASE_FAILED = "Rebase failed. Please rebase locally"


def request_rebase(state: SimulatorState, project: Project, mr: MergeRequest, user: User) -> None:
    """Enqueue a rebase of the MR by `user` (checks are the route's)."""
    mr.rebase_requested_by = user
    mr.rebase_reads_left = state.rebase_reads
    mr.merge_error = None
    if mr.rebase_reads_left == 0:
        finish_rebase(state, project, mr)


def rebase_in_progress(mr: MergeRequest) -> bool:
    return mr.rebase_requested_by is not None


def advance_rebase(state: SimulatorState, project: Project, mr: MergeRequest) -> None:
    """One API read of the MR happened: the background rebase gets closer to running."""
    if mr.rebase_requested_by is None:
        return
    mr.rebase_reads_left -= 1
    if mr.rebase_reads_left <= 0:
        finish_rebase(state, project, mr)


def finish_rebase(state: SimulatorState, project: Project, mr: MergeRequest) -> None:
    """Run the enqueued rebase now (no-op when none is enqueued)."""
    user = mr.rebase_requested_by
    if user is None:
        return
    mr.rebase_requested_by = None
    mr.rebase_reads_left = 0
    if mr.state != "opened" or mr.target_branch not in project.repository.branches:
        return
    if mr.rebase_failure is not None:
        mr.merge_error, mr.rebase_failure = mr.rebase_failure, None
        return
    rebase(state, project, mr, user)


def rebase(state: SimulatorState, project: Project, mr: MergeRequest, user: User) -> None:
    """Replay the MR's own commits (merge commits dropped, as `git rebase` does) on the target."""
    repo = project.repository
    target = repo.branches[mr.target_branch]
    if repo.is_ancestor(target, mr.sha):
        mr.merge_error = None  # already on the target head: nothing to rewrite
        return
    own = [c for c in reversed(repo.log(mr.sha, exclude=target)) if len(c.parent_ids) <= 1]
    current = repo.commits[target]
    for commit in own:
        parent_tree = repo.commits[commit.parent_ids[0]].tree if commit.parent_ids else {}
        tree, conflicts = merge_trees(parent_tree, current.tree, commit.tree)
        if conflicts:
            mr.merge_error = REBASE_FAILED
            return
        current = repo.create_commit(
            tree=tree,
            parent_ids=(current.id,),
            message=commit.message,
            author=commit.author,
            committer=user.signature,
            when=state.now(),
        )
    mr.merge_error = None
    state.set_branch(project, mr.source_branch, current.id, user)
