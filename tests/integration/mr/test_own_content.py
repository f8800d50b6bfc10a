"""`own_content.content_mismatch` against the simulator: a commit the service made from its
file actions passes, whoever is named as its author; one that differs anywhere does not."""

from __future__ import annotations

import base64

import pytest
from mr_harness import PROJECT, TOKEN

from workqueue.gitlab.client import GitLabClient
from workqueue.types.mr.executors.own_content import content_mismatch

ACTIONS = [
    {"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"},
    {
        "action": "create",
        "file_path": "bin/blob",
        "content": base64.b64encode(b"\x00\x01bin").decode(),
        "encoding": "base64",
    },
    {"action": "move", "file_path": "patches/moved.patch", "previous_path": "patches/keep.patch"},
    {"action": "chmod", "file_path": "bin/blob", "execute_filemode": True},
    {"action": "delete", "file_path": "README.md"},
]


@pytest.fixture
def client(simulator):
    with GitLabClient(simulator.url, TOKEN, timeout=5) as client:
        yield client


def test_the_commit_made_from_the_actions_carries_them(simulator, client):
    commit = client.commit(
        PROJECT, branch="bot", start_branch="main", message="m", actions=ACTIONS, force=True
    )
    made = client.get_commit(PROJECT, commit.sha)
    assert content_mismatch(client, PROJECT, made, ACTIONS) is None


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"patches/evil.patch": "+evil\n"}, "it also changes patches/evil.patch"),
        ({"kernel.spec": "Version: 666\n"}, "kernel.spec is not as the submission leaves it"),
        ({"README.md": "# back\n"}, "README.md is not as the submission leaves it"),
    ],
)
def test_anything_else_on_top_is_a_mismatch(simulator, client, files, why):
    client.commit(
        PROJECT, branch="bot", start_branch="main", message="m", actions=ACTIONS, force=True
    )
    tampered = simulator.push(PROJECT, "bot", files, user=simulator.bot.username)
    squashed = simulator.log_commits(PROJECT, tampered, exclude="main")
    assert len(squashed) == 2  # the tampering is a second commit on top of the service's
    commit = client.get_commit(PROJECT, tampered)
    assert content_mismatch(client, PROJECT, commit, ACTIONS) is not None
    # Made into one commit on the target (as a forger would), it is still caught.
    tree = {"kernel.spec": "Version: 2\n", "patches/moved.patch": "--- a\n+++ b\n"}
    forged = simulator.force_push(
        PROJECT,
        "bot",
        {**tree, "bin/blob": b"\x00\x01bin", **files},
        onto=simulator.branch_head(PROJECT, "main"),
        user=simulator.bot.username,
    )
    mismatch = content_mismatch(client, PROJECT, client.get_commit(PROJECT, forged), ACTIONS)
    assert mismatch is not None


def test_a_file_that_lost_its_executable_bit_is_a_mismatch(simulator, client):
    forged = simulator.force_push(
        PROJECT,
        "bot",
        {
            "kernel.spec": "Version: 2\n",
            "patches/moved.patch": "--- a\n+++ b\n",
            "bin/blob": b"\x00\x01bin",  # force_push writes no executable bit
        },
        onto=simulator.branch_head(PROJECT, "main"),
        user=simulator.bot.username,
    )
    mismatch = content_mismatch(client, PROJECT, client.get_commit(PROJECT, forged), ACTIONS)
    assert mismatch == "bin/blob is not as the submission leaves it"
