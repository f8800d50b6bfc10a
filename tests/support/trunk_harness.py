"""Running the `trunk` type against the GitLab simulator: pushes, pipeline results, hooks."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import sqlalchemy as sa
from api_harness import build_client
from mr_harness import TOKEN
from sqlalchemy.orm import Session, sessionmaker

from workqueue.gitlab.client import GitLabClient
from workqueue.queue.registry import TypeRegistry
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.catalog import build_registry
from workqueue.types.plugin import InstallContext

PROJECT = "group/app"
BRANCH = "main"
QUEUE = f"{PROJECT}:{BRANCH}"
SECRET = "hook-secret"
WEBHOOK = "/api/webhooks/gitlab"
_counter = itertools.count(1)


def trunk_section(gitlab_url: str, **overrides: Any) -> dict[str, Any]:
    queue = {"project": PROJECT, "branch": BRANCH, "max_concurrent": 1}
    queue.update(overrides.pop("queue", {}))
    section: dict[str, Any] = {
        "gitlab_url": gitlab_url,
        "queues": [queue],
        "gate_recheck_seconds": 0.3,
        "pipeline_check_seconds": 30,
    }
    section.update(overrides)
    return section


def trunk_registry(gitlab_url: str, **overrides: Any) -> TypeRegistry:
    return build_registry(
        {"trunk": trunk_section(gitlab_url, **overrides)},
        InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
    )


def new_simulator() -> GitLabSimulator:
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    simulator.create_project(PROJECT, {"README.md": "# app\n"})
    return simulator


@contextmanager
def trunk_app(
    database_url: Any, simulator: GitLabSimulator, **overrides: Any
) -> Iterator[httpx.Client]:
    """The real app (HTTP, webhooks, processing) handling only `trunk`."""
    rules = overrides.pop("rules", ())
    with build_client(
        database_url,
        simulator,
        webhook_secret=SECRET,
        rules=rules,
        handled_types={"trunk": trunk_section(simulator.url, **overrides)},
    ) as client:
        yield client


def land(simulator: GitLabSimulator) -> str:
    """A commit landing on the branch (what a merge does); returns its sha."""
    return simulator.push(PROJECT, BRANCH, {f"change-{next(_counter)}.txt": "x\n"})


def push_hook(simulator: GitLabSimulator, sha: str, before: str | None = None) -> dict[str, Any]:
    return simulator.push_hook(PROJECT, BRANCH, before=before or "0" * 40, after=sha)


def deliver(
    client: httpx.Client,
    simulator: GitLabSimulator,
    payload: dict[str, Any],
    key: str | None = None,
) -> str:
    """POST a hook to the app; returns the answer's status ("accepted", ...)."""
    answer = simulator.send_webhook(
        str(client.base_url) + WEBHOOK,
        payload,
        secret_token=SECRET,
        idempotency_key=key or str(uuid.uuid4()),
    )
    assert answer.status_code == 200, answer.text
    status: str = answer.json()["status"]
    return status


def finish_pipeline(simulator: GitLabSimulator, pipeline_id: int, status: str = "success") -> None:
    simulator.set_pipeline_status(pipeline_id, status)


@dataclass(frozen=True)
class Head:
    id: uuid.UUID
    sha: str
    sequence: int
    state: str
    phase: str
    build_strategy: str | None
    base_sha: str | None
    pipeline_id: int | None
    completion_reason: str | None
    error: str | None


def heads(sessions: sessionmaker[Session]) -> dict[str, Head]:
    """Every head of the queue, by sha."""
    with sessions() as session:
        rows = session.execute(
            sa.text(
                "SELECT d.id, d.sha, d.sequence, d.state, w.phase, d.build_strategy, d.base_sha,"
                "  d.pipeline_id, d.completion_reason, w.error "
                "FROM trunk_details AS d JOIN work_items AS w ON w.id = d.id ORDER BY d.sequence"
            )
        ).all()
    return {row.sha: Head(*row) for row in rows}


def head(sessions: sessionmaker[Session], sha: str) -> Head | None:
    return heads(sessions).get(sha)


def queue_row(sessions: sessionmaker[Session]) -> Any:
    with sessions() as session:
        return session.execute(
            sa.text("SELECT * FROM trunk_queues WHERE name = :name"), {"name": QUEUE}
        ).one_or_none()


def in_flight(sessions: sessionmaker[Session]) -> int:
    row = queue_row(sessions)
    return 0 if row is None else int(row.in_flight)


def state_is(sessions: sessionmaker[Session], sha: str, *states: str) -> bool:
    found = head(sessions, sha)
    return found is not None and found.state in states


def building(sessions: sessionmaker[Session], sha: str) -> bool:
    found = head(sessions, sha)
    return found is not None and found.state == "processing" and found.pipeline_id is not None
