"""Security review of issue 22: a caller cannot make the service remove a label a person
set (real PostgreSQL, the simulator).

A label is the service's to remove only when the service put it on the MR. A caller
that names a label a person had already added (a hold such as `do-not-merge`) and then
stops naming it must not get the service to take the person's label off.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "integration" / "mr"))

import gitlab
import pytest
from mr_harness import FILES, PROJECT, TOKEN
from test_mr_lifecycle_support import Lifecycle, lifecycle

from workqueue.testing.gitlab_simulator import GitLabSimulator

PERSON_TOKEN = "grace-token"  # the simulator's: guards nothing


@pytest.fixture
def simulator():
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    simulator.create_project(PROJECT, FILES)
    try:
        yield simulator
    finally:
        simulator.stop()
    assert simulator.errors == []


def update(world: Lifecycle, item_id: Any, **fields: Any) -> None:
    spec = {"action": "update", "file_path": "kernel.spec", "content": f"{fields!r}\n"}
    assert world.submit(file_actions=[spec], **fields) == item_id
    world.wait_settled()


def labels(simulator: GitLabSimulator, iid: int) -> list[str]:
    return sorted(simulator.merge_request(PROJECT, iid)["labels"])


def test_naming_a_persons_label_then_dropping_it_does_not_remove_it(sessions, simulator):
    simulator.add_user("grace", "Grace Maintainer", token=PERSON_TOKEN)
    person = gitlab.Gitlab(simulator.url, private_token=PERSON_TOKEN)
    with lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr(labels=["bot"])
        person.projects.get(PROJECT, lazy=True).mergerequests.update(
            iid, {"add_labels": "do-not-merge"}
        )
        update(world, item_id, labels=["bot", "do-not-merge"])  # already there: no write
        assert labels(simulator, iid) == ["bot", "do-not-merge"]
        update(world, item_id, labels=["bot"])
        assert labels(simulator, iid) == ["bot", "do-not-merge"]


def test_a_label_the_service_added_is_still_removed_when_no_longer_named(sessions, simulator):
    with lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr(labels=["bot"])
        update(world, item_id, labels=["bot", "kernel"])
        assert labels(simulator, iid) == ["bot", "kernel"]
        update(world, item_id, labels=["bot"])
        assert labels(simulator, iid) == ["bot"]
        update(world, item_id, labels=[])
        assert labels(simulator, iid) == []
