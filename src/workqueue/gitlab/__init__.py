"""The GitLab adapter: typed operations over python-gitlab with classified errors.

    client = GitLabClient(url, token, timeout=30)
    project = client.project("acme/widgets")  # cached per client
    client.commit("acme/widgets", branch="workqueue/x", start_branch="main", force=True,
                  message="...", actions=[{"action": "update", "file_path": "a", "content": "b"}])

Failures are `RetryableGitLabError` (back off and try again) or
`PermanentGitLabError` (GitLab refused: fail with its message); see `errors.py`.
"""

from workqueue.gitlab.client import DEFAULT_TIMEOUT_SECONDS, GitLabClient, ProjectRef
from workqueue.gitlab.errors import (
    GitLabError,
    PermanentGitLabError,
    ResponseShapeError,
    RetryableGitLabError,
    classify,
    retry_after_seconds,
)
from workqueue.gitlab.models import (
    BranchInfo,
    CommitAction,
    CommitInfo,
    CompareInfo,
    JobInfo,
    MergeRequestInfo,
    MergeTrainCarInfo,
    PipelineInfo,
    ProjectInfo,
    UserInfo,
)
from workqueue.gitlab.transport import OnCall

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "BranchInfo",
    "CommitAction",
    "CommitInfo",
    "CompareInfo",
    "GitLabClient",
    "GitLabError",
    "JobInfo",
    "MergeRequestInfo",
    "MergeTrainCarInfo",
    "OnCall",
    "PermanentGitLabError",
    "PipelineInfo",
    "ProjectInfo",
    "ProjectRef",
    "ResponseShapeError",
    "RetryableGitLabError",
    "UserInfo",
    "classify",
    "retry_after_seconds",
]
