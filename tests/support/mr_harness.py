"""Running the `mr` type against the GitLab simulator in tests."""

from __future__ import annotations

from typing import Any

from workqueue.db.transactions import run_in_transaction
from workqueue.gitlab.client import GitLabClient
from workqueue.queue import Submitter
from workqueue.queue.registry import TypeRegistry
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.catalog import build_registry
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.submit import SubmitResult, submit_mr
from workqueue.types.plugin import InstallContext

PROJECT = "group/sub/project"
TOKEN = "simulator-token"
FILES = {
    "README.md": "# project\n",
    "kernel.spec": "Version: 1\n",
    "patches/keep.patch": "--- a\n+++ b\n",
}


def mr_registry(simulator: GitLabSimulator, **section: Any) -> TypeRegistry:
    return build_registry(
        {"mr": {"gitlab_url": simulator.url, **section}},
        InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
    )


def body(**overrides: Any) -> MRWorkItemCreate:
    fields: dict[str, Any] = {
        "project": PROJECT,
        "source_branch": "workqueue/sync-kernel",
        "title": "Sync kernel sources",
        "description": "Automated sync",
        "commit_message": "Sync sources from upstream",
        "labels": ["bot", "sync"],
        "file_actions": [
            {"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"},
            {"action": "create", "file_path": "patches/new.patch", "content": "+fix\n"},
        ],
    }
    fields.update(overrides)
    return MRWorkItemCreate.model_validate(fields)


def submit(sessions: Any, registry: TypeRegistry, submission: MRWorkItemCreate) -> SubmitResult:
    config = registry.get("mr").config
    assert isinstance(config, MRTypeConfig)
    return run_in_transaction(
        sessions,
        lambda session: submit_mr(
            session, submission, submitter=Submitter("local", "tests"), config=config
        ),
    )
