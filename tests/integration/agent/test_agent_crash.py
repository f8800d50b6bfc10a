"""A worker killed (SIGKILL) mid-task leaves exactly one placeholder and one reply in the
thread once another worker recovers the task: killed after GitLab took the placeholder
but before its step committed, and killed while the agent was computing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from agent_world import agent_world
from fake_agent import Scripted
from harness import wait_until

from workqueue.queue.models import Phase

SUPPORT = Path(__file__).resolve().parents[2] / "support"
PLACEHOLDER_ROUTE = "/projects/:id/issues/:issue_iid/discussions/:discussion_id/notes"
pytestmark = pytest.mark.slow


@contextmanager
def child_manager(database_url, simulator, agent_url: str) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path])}
    child = subprocess.Popen(
        [
            sys.executable,
            str(SUPPORT / "run_agent_manager.py"),
            database_url.render_as_string(hide_password=False),
            simulator.url,
            agent_url,
        ],
        env=env,
    )
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)


def kill(child: subprocess.Popen[bytes]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(10)


def test_killed_after_the_placeholder_before_its_commit(database_url, sessions, simulator):
    # The placeholder is taken by GitLab, but its answer comes too late for the worker.
    simulator.inject_fault("POST", PLACEHOLDER_ROUTE, status=None, latency_after=30)
    # No manager in this process until the child is dead: `agent_world` runs one, so the
    # note is taken while no worker of this process handles agent tasks.
    with agent_world(sessions, simulator, None, handled=[]) as world:
        note = world.comment("@workqueue-bot bump it")
        with child_manager(database_url, simulator, world.agent.url) as child:
            wait_until(lambda: len(world.bot_notes_on(note)) == 1, timeout=30, what="placeholder")
            kill(child)
        simulator.faults.clear()
        world.recover()
        task = world.wait_task(note, Phase.COMPLETED, timeout=60)
        assert task.state == "replied"
        [reply] = world.bot_notes(note)  # the placeholder, found by its marker and edited
        assert "Done." in reply
        assert len(world.agent.calls) == 1


def test_killed_while_the_agent_computes(database_url, sessions, simulator):
    with agent_world(sessions, simulator, None, handled=[]) as world:
        world.agent.answer(Scripted(body={"reply": "slow answer"}, delay=5))
        world.agent.default = Scripted(body={"reply": "Recovered answer."})
        note = world.comment("@workqueue-bot think")
        with child_manager(database_url, simulator, world.agent.url) as child:
            wait_until(lambda: len(world.agent.calls) == 1, timeout=30, what="the agent call")
            kill(child)
        world.recover()
        task = world.wait_task(note, Phase.COMPLETED, timeout=60)
        [reply] = world.bot_notes(note)
        assert "Recovered answer." in reply
        assert task.reply_note_id is not None
        assert len(world.agent.calls) == 2  # computed again: the agent writes nothing
