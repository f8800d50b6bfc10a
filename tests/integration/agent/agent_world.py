"""One test's world for the `agent` type: PostgreSQL, the engine running `agent` and `mr`,
the GitLab simulator with people of each access level, and a fake agent."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from fake_agent import FakeAgent, fake_agent
from harness import fast_config, running_manager, settled, wait_until
from mr_harness import FILES, PROJECT, TOKEN
from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.transactions import run_in_transaction
from workqueue.gitlab.client import GitLabClient
from workqueue.queue import TypeRegistry
from workqueue.queue.intake.deliveries import store_delivery
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.agent.models import AgentWorkItem
from workqueue.types.catalog import build_registry
from workqueue.types.plugin import InstallContext

AGENT_TOKEN_ENV = "WQ_TEST_AGENT_TOKEN"
AGENT_TOKEN = "agent-token-for-tests"
DEVELOPER, GUEST, MAINTAINER = "dev", "guest", "maint"
_deliveries = itertools.count(1)
KINDS = {"issue": "Issue", "merge_request": "MergeRequest"}


@dataclass
class AgentWorld:
    sessions: sessionmaker[Session]
    registry: TypeRegistry
    manager: ProcessingManager
    simulator: GitLabSimulator
    agent: FakeAgent
    issue_iid: int
    conninfo: str | None = None
    stack: ExitStack = field(default_factory=ExitStack)

    def recover(self) -> None:
        """Another worker takes over: a manager that handles both types."""
        self.manager = self.stack.enter_context(
            running_manager(
                self.sessions,
                self.registry,
                fast_config(),
                handled_types=["mr", "agent"],
                conninfo=self.conninfo,
            )
        )

    def bot_notes_on(self, note_id: int) -> list[str]:
        """The service's notes in the note's thread, read from GitLab only."""
        discussion = self.simulator.note_discussion_id(note_id)
        notes = self.simulator.discussion(PROJECT, "Issue", self.issue_iid, discussion)
        return [n["body"] for n in notes if n["author"]["username"] == self.simulator.bot.username]

    def comment(
        self,
        body: str,
        *,
        user: str = DEVELOPER,
        noteable: str = "issue",
        iid: int | None = None,
        discussion_id: str | None = None,
        deliver: bool = True,
    ) -> int:
        note_id = self.simulator.add_comment(
            PROJECT,
            KINDS[noteable],
            iid or self.issue_iid,
            body,
            user=user,
            discussion_id=discussion_id,
        )
        if deliver:
            self.deliver(note_id)
        return note_id

    def deliver(self, note_id: int, *, action: str = "create", key: str | None = None) -> None:
        hook = self.simulator.note_hook(note_id, action)
        delivery = key or f"note-{next(_deliveries)}"
        run_in_transaction(
            self.sessions,
            lambda session: store_delivery(
                session,
                self.registry,
                source="gitlab",
                delivery_key=delivery,
                event_type="note",
                body=hook,
            ),
        )
        self.manager.intake.stored_here()

    def tasks(self) -> list[AgentWorkItem]:
        with self.sessions() as session:
            rows = session.scalars(sa.select(AgentWorkItem).order_by(AgentWorkItem.note_id))
            items = list(rows)
            session.expunge_all()
            return items

    def task(self, note_id: int) -> AgentWorkItem:
        [found] = [task for task in self.tasks() if task.note_id == note_id]
        return found

    def wait_task(self, note_id: int, phase: str, timeout: float = 30) -> AgentWorkItem:
        def ended() -> bool:
            found = [task for task in self.tasks() if task.note_id == note_id]
            return bool(found) and found[0].phase == phase

        wait_until(ended, timeout=timeout, what=f"task of note {note_id} {phase}")
        self.wait_settled(timeout)
        return self.task(note_id)

    def wait_settled(self, timeout: float = 30) -> None:
        """No item busy and no delivery waiting to be resolved: a note that would create
        a task has created it by then."""

        def quiet() -> bool:
            with self.sessions() as session:
                waiting = session.scalar(sa.text("SELECT count(*) FROM incoming_deliveries"))
            return waiting == 0 and settled(self.sessions)

        wait_until(quiet, timeout=timeout, what="settled")

    def thread_of(self, note_id: int) -> list[dict[str, Any]]:
        discussion = self.simulator.note_discussion_id(note_id)
        with self.sessions() as session:
            noteable = session.scalar(
                sa.select(AgentWorkItem.noteable_type).where(AgentWorkItem.note_id == note_id)
            )
        with self.sessions() as session:
            iid = session.scalar(
                sa.select(AgentWorkItem.noteable_iid).where(AgentWorkItem.note_id == note_id)
            )
        kind = KINDS[noteable or "issue"]
        return self.simulator.discussion(PROJECT, kind, iid or self.issue_iid, discussion)

    def bot_notes(self, note_id: int) -> list[str]:
        return [
            note["body"]
            for note in self.thread_of(note_id)
            if note["author"]["username"] == self.simulator.bot.username
        ]


def new_simulator() -> GitLabSimulator:
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    # As GitLab protects a new project's default branch: Maintainers merge.
    simulator.create_project(PROJECT, FILES, protected_branches=["main"])
    simulator.add_member(PROJECT, DEVELOPER, 30)
    simulator.add_member(PROJECT, GUEST, 10)
    simulator.add_member(PROJECT, MAINTAINER, 40)
    return simulator


@contextmanager
def agent_world(
    sessions: sessionmaker[Session],
    simulator: GitLabSimulator,
    conninfo: str | None,
    *,
    handled: list[str] | None = None,
    **agent_section: Any,
) -> Iterator[AgentWorld]:
    """`conninfo`: the manager LISTENs, as in the service, so an item created by another
    item's step (the agent's `mr` item) is woken at its commit."""
    with fake_agent() as agent:
        section = {
            "gitlab_url": simulator.url,
            "projects": ["group/**"],
            "agent_url": agent.url,
            "agent_token_env": AGENT_TOKEN_ENV,
            "retry_initial_seconds": 0.1,
            "dashboard_url": "https://workqueue.example.com",
            **agent_section,
        }
        registry = build_registry(
            {"mr": {"gitlab_url": simulator.url}, "agent": section},
            InstallContext(
                gitlab_token=TOKEN,
                gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
            ),
        )
        issue = simulator.create_issue(PROJECT, "Bump the kernel")
        types = ["mr", "agent"] if handled is None else handled
        with running_manager(
            sessions, registry, fast_config(), handled_types=types, conninfo=conninfo
        ) as manager:
            world = AgentWorld(sessions, registry, manager, simulator, agent, issue, conninfo)
            with world.stack:
                yield world


def item_id(task: AgentWorkItem) -> uuid.UUID:
    return task.id
