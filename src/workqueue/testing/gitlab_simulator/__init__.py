"""A faithful, in-process simulation of the GitLab REST API v4 subset the service uses.

    with GitLabSimulator(token="t") as sim:
        sim.create_project("acme/widgets", {"README.md": "hi\n"})
        gl = gitlab.Gitlab(sim.url, private_token="t")
        ...
        sim.inject_fault("POST", "/projects/:id/repository/commits", status=500, times=2)
        assert sim.request_count("POST", "/projects/:id/repository/commits") == 3

See `simulator.GitLabSimulator` for the helpers (pushes, pipelines, approvals,
webhooks), `faults.FaultInjector.inject` for the fault options, `hook_delivery`
for webhooks GitLab loses or disables, and `versions` for `gitlab_version`.
"""

from workqueue.testing.gitlab_simulator.ci import JobSpec
from workqueue.testing.gitlab_simulator.faults import FaultRule, RequestRecord
from workqueue.testing.gitlab_simulator.hook_delivery import HookDelivery, HookLoss, ProjectHook
from workqueue.testing.gitlab_simulator.repository import ZERO_SHA, Commit
from workqueue.testing.gitlab_simulator.simulator import GitLabSimulator, MergeRequestHead
from workqueue.testing.gitlab_simulator.state import User

__all__ = [
    "ZERO_SHA",
    "Commit",
    "FaultRule",
    "GitLabSimulator",
    "HookDelivery",
    "HookLoss",
    "JobSpec",
    "MergeRequestHead",
    "ProjectHook",
    "RequestRecord",
    "User",
]
