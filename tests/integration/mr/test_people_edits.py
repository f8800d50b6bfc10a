"""People's edits win: what a person changes on the service's MR survives its updates.

The service remembers what it last set on the MR; an update changes a field only
while GitLab still shows that value, and touches only the labels its own
submissions named (through `add_labels` / `remove_labels`). A person's edit goes
through the GitLab API with the person's own token, as in GitLab's UI.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import gitlab
import pytest
from mr_harness import PROJECT
from test_mr_lifecycle_support import MR_ROUTE, Lifecycle, lifecycle

PERSON_TOKEN = "grace-token"  # the simulator's: guards nothing


@pytest.fixture
def person(simulator) -> gitlab.Gitlab:
    simulator.add_user("grace", "Grace Maintainer", token=PERSON_TOKEN)
    return gitlab.Gitlab(simulator.url, private_token=PERSON_TOKEN)


def edit(person: gitlab.Gitlab, iid: int, **fields: Any) -> None:
    """A person's edit of the MR (title, description, add_labels, remove_labels)."""
    person.projects.get(PROJECT, lazy=True).mergerequests.update(iid, fields)


def shown(world: Lifecycle, iid: int) -> tuple[str, str, list[str], bool]:
    mr = world.simulator.merge_request(PROJECT, iid)
    return mr["title"], mr["description"], sorted(mr["labels"]), mr["draft"]


def update(world: Lifecycle, item_id, **fields: Any) -> None:
    """A resubmission with new content (so `ensure_mr` runs), settled."""
    spec = {"action": "update", "file_path": "kernel.spec", "content": f"{fields!r}\n"}
    assert world.submit(file_actions=[spec], **fields) == item_id
    world.wait_settled()


def kept_audits(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    entries = [
        json.loads(record.getMessage().removeprefix("audit "))
        for record in caplog.records
        if record.name == "workqueue.audit"
    ]
    return [entry for entry in entries if entry["event_type"] == "metadata_kept"]


def test_a_persons_title_description_labels_and_draft_survive_two_updates(
    sessions, simulator, person, caplog
):
    caplog.set_level(logging.INFO, logger="workqueue.audit")
    with lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr(labels=["bot", "sync"])
        edit(
            person,
            iid,
            title="Draft: Kernel sync, held for QA",
            description="Waiting for the QA sign-off.",
            add_labels="needs-qa",
            remove_labels="sync",
        )
        simulator.reset_requests()

        update(
            world,
            item_id,
            title="Sync kernel sources v2",
            description="Automated sync v2",
            labels=["bot", "sync", "kernel"],
        )
        # The person's title (with its draft), description and labels stay; the
        # service adds the label its submission newly names.
        assert shown(world, iid) == (
            "Draft: Kernel sync, held for QA",
            "Waiting for the QA sign-off.",
            ["bot", "kernel", "needs-qa"],
            True,
        )
        assert world.detail(item_id).merge_blocker["code"] == "draft"

        update(
            world,
            item_id,
            title="Sync kernel sources v3",
            description="Automated sync v3",
            labels=["kernel", "v3"],
        )
        # "bot" is the service's and no longer named: removed; "needs-qa" is never.
        assert shown(world, iid) == (
            "Draft: Kernel sync, held for QA",
            "Waiting for the QA sign-off.",
            ["kernel", "needs-qa", "v3"],
            True,
        )
        assert world.detail(item_id).merge_blocker["code"] == "draft"
        assert world.item(item_id).phase == "active"
        assert world.merge_calls() == []

    # Labels change one by one, never as a whole set a concurrent edit would lose.
    writes = [record.body for record in simulator.app.log.records("PUT", MR_ROUTE)]
    assert writes, "the service never updated the MR"
    assert all("labels" not in body for body in writes)
    kept = kept_audits(caplog)
    assert {entry["work_item_id"] for entry in kept} == {str(item_id)}
    fields = [entry["details"]["field"] for entry in kept]
    assert sorted(fields) == sorted(["title", "draft", "description", "labels"] * 2)
    labels = [entry["details"] for entry in kept if entry["details"]["field"] == "labels"]
    assert labels[0]["added_by_people"] == ["needs-qa"]
    assert labels[0]["removed_by_people"] == ["sync"]
    assert labels[1]["added_by_people"] == ["needs-qa"]
    assert labels[1]["removed_by_people"] == []


def test_a_draft_alone_is_kept_and_the_title_still_follows_the_submission(
    sessions, simulator, person
):
    with lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        edit(person, iid, title="Draft: Sync kernel sources")

        update(world, item_id, title="Sync kernel sources v2", description="Automated sync v2")
        assert shown(world, iid)[:2] == ("Draft: Sync kernel sources v2", "Automated sync v2")
        assert world.detail(item_id).merge_blocker["code"] == "draft"

        # Marked ready by the person: the service's again, and it merges once green.
        edit(person, iid, title="Sync kernel sources v2")
        update(world, item_id, title="Sync kernel sources v3")
        assert shown(world, iid)[0] == "Sync kernel sources v3"
        assert world.detail(item_id).merge_blocker["code"] != "draft"


def test_an_edit_put_back_makes_the_field_the_services_again(sessions, simulator, person):
    with lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr(description="Automated sync")
        edit(person, iid, description="A person's words")
        update(world, item_id, description="Automated sync v2")
        assert shown(world, iid)[1] == "A person's words"

        edit(person, iid, description="Automated sync")  # what the service had set
        update(world, item_id, description="Automated sync v3")
        assert shown(world, iid)[1] == "Automated sync v3"
