"""A worker killed between pushing the commit and opening the MR leaves exactly one MR."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from harness import fast_config, item_row, running_manager, settled, wait_until
from mr_harness import FILES, PROJECT, TOKEN, body, mr_registry, submit

from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.mr.models import MRWorkItem

SUPPORT = Path(__file__).resolve().parents[2] / "support"
pytestmark = pytest.mark.slow


def world_sha(sessions, item_id):
    with sessions() as session:
        return session.get(MRWorkItem, item_id).mr_sha


def test_sigkill_after_commit_before_mr_yields_exactly_one_mr(database_url, sessions):
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    try:
        simulator.create_project(PROJECT, FILES)
        registry = mr_registry(simulator)
        # The child stalls on the compare that follows its commit.
        simulator.inject_fault("GET", "/projects/:id/repository/compare", status=None, latency=4)
        result = submit(sessions, registry, body())
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path])}
        child = subprocess.Popen(
            [
                sys.executable,
                str(SUPPORT / "run_mr_manager.py"),
                database_url.render_as_string(hide_password=False),
                simulator.url,
            ],
            env=env,
        )
        try:
            wait_until(
                lambda: simulator.request_count("POST", "/projects/:id/repository/commits") == 1,
                timeout=30,
                what="the child's commit",
            )
            child.send_signal(signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert simulator.merge_requests(PROJECT) == []
        # The commit is on the branch but its sha was never recorded.
        unrecorded = simulator.branch_head(PROJECT, "workqueue/sync-kernel")
        assert unrecorded is not None

        with running_manager(sessions, registry, fast_config(), handled_types=["mr"]):
            wait_until(lambda: settled(sessions), timeout=30, what="recovery")
        (merge_request,) = simulator.merge_requests(PROJECT)
        assert merge_request["state"] == "opened"
        assert len(simulator.log_commits(PROJECT, "workqueue/sync-kernel", exclude="main")) == 1
        row = item_row(sessions, result.item.id)
        assert (row.phase, row.actionable, row.attempts, row.error) == ("active", False, 0, None)
        # Its own stamped commit was recognised (not taken for a person's) and, holding
        # this content on the target's head, kept: no second commit of the same content.
        assert simulator.branch_head(PROJECT, "workqueue/sync-kernel") == unrecorded
        assert simulator.request_count("POST", "/projects/:id/repository/commits") == 1
        assert world_sha(sessions, result.item.id) == unrecorded
    finally:
        simulator.stop()
    assert simulator.errors == []
