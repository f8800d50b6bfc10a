"""Whether an MR's head pipeline on another sha is a merged result of the recorded head.

A merged-results pipeline runs on `refs/merge-requests/<iid>/merge`, on a temporary
commit merging the MR's head into its target, so its sha is never the head's. It
counts for the head (for a merge by `reconcile_mr`, for a job retry by `retry_ci`)
only when GitLab names it as the MR's head pipeline, its ref is this MR's merge ref,
and its commit, read from GitLab (never taken from a hook), has the recorded head
among its parents. The answer is kept in `merge_attempts.merged_result`: commits
never change, so each pipeline's commit is read once.
"""

from __future__ import annotations

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.models import MergeRequestInfo
from workqueue.types.mr.executors.merge_attempts import MergeAttempts
from workqueue.types.mr.models import MRWorkItem


def merge_ref(iid: int) -> str:
    """The ref GitLab runs an MR's merged-results pipelines on."""
    return f"refs/merge-requests/{iid}/merge"


def merged_result_tests_head(
    gitlab: GitLabClient,
    item: MRWorkItem,
    merge_request: MergeRequestInfo,
    attempts: MergeAttempts,
) -> bool:
    """Whether the MR's head pipeline, on another sha than the head, is a merged result
    of the item's recorded head (`mr_sha`); records a confirmation in `attempts`."""
    head, sha = merge_request.sha, merge_request.head_pipeline_sha
    pipeline_id = merge_request.head_pipeline_id
    if head is None or head != item.mr_sha or pipeline_id is None or sha in {None, head}:
        return False
    if merge_request.head_pipeline_ref != merge_ref(merge_request.iid):
        return False
    assert sha is not None  # noqa: S101 - checked just above
    if attempts.merged_result == (pipeline_id, sha):
        return True
    if head not in gitlab.get_commit(item.project, sha).parent_ids:
        return False  # a merged result of another commit: tests nothing we merge
    attempts.merged_result = (pipeline_id, sha)
    return True
