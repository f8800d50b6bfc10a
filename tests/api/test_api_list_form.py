"""List answers carry a digest of each file action instead of its content; one item still
comes whole."""

from __future__ import annotations

import base64
import hashlib

import pytest
from api_harness import build_client
from mr_harness import PROJECT

MEGABYTE = 1_000_000


@pytest.fixture
def quiet_client(database_url, simulator):
    """Items stay as submitted: nothing pushes 20 MB to the simulator meanwhile."""
    mr = {"gitlab_url": simulator.url, "content": {"binary_paths": ["*.bin"]}}
    with build_client(
        database_url, simulator, process_items=False, handled_types={"mr": mr}
    ) as client:
        yield client


def submission(n: int, content: str) -> dict:
    return {
        "project": PROJECT,
        "source_branch": f"workqueue/big-{n}",
        "title": f"Big {n}",
        "commit_message": "m",
        "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": content}],
    }


def test_twenty_items_of_a_megabyte_list_in_a_small_page(quiet_client):
    contents = [chr(ord("a") + n) * MEGABYTE for n in range(20)]
    for n, content in enumerate(contents):
        assert (
            quiet_client.post("/api/work-items/mr", json=submission(n, content)).status_code == 201
        )

    for path in ("/api/work-items", "/api/work-items/mr"):
        answer = quiet_client.get(path, params={"limit": 50})
        assert answer.status_code == 200
        assert len(answer.content) < 50_000, len(answer.content)
        items = answer.json()["items"]
        assert len(items) == 20
        for item in items:
            n = int(item["details"]["title"].split()[1])
            (action,) = item["details"]["file_actions"]
            assert action == {
                "action": "update",
                "file_path": "kernel.spec",
                "previous_path": None,
                "encoding": "text",
                "size": MEGABYTE,
                "sha256": hashlib.sha256(contents[n].encode()).hexdigest(),
            }

    one = quiet_client.get(f"/api/work-items/{items[0]['id']}").json()
    n = int(one["details"]["title"].split()[1])
    assert one["details"]["file_actions"][0]["content"] == contents[n]


def test_every_kind_of_file_action_has_the_list_form(quiet_client):
    binary = bytes(range(256)) * 3
    text = "héllo\n"
    body = {
        **submission(0, "x"),
        "file_actions": [
            {"action": "update", "file_path": "kernel.spec", "content": text},
            {
                "action": "create",
                "file_path": "blob.bin",
                "content": base64.b64encode(binary).decode(),
                "encoding": "base64",
            },
            {"action": "delete", "file_path": "README.md"},
            {
                "action": "move",
                "file_path": "patches/moved.patch",
                "previous_path": "patches/keep.patch",
            },
        ],
    }
    chmod_only = {
        **submission(1, "x"),
        "file_actions": [{"action": "chmod", "file_path": "kernel.spec", "execute_filemode": True}],
    }
    for submitted in (body, chmod_only):
        answer = quiet_client.post("/api/work-items/mr", json=submitted)
        assert answer.status_code == 201, answer.text

    newest, oldest = quiet_client.get("/api/work-items/mr").json()["items"]
    update, create, delete, move = oldest["details"]["file_actions"]
    (chmod,) = newest["details"]["file_actions"]

    assert (update["size"], update["sha256"]) == (
        len(text.encode()),
        hashlib.sha256(text.encode()).hexdigest(),
    )
    assert (create["encoding"], create["size"], create["sha256"]) == (
        "base64",
        len(binary),
        hashlib.sha256(binary).hexdigest(),
    )
    assert delete == {
        "action": "delete",
        "file_path": "README.md",
        "previous_path": None,
        "encoding": None,
        "size": None,
        "sha256": None,
    }
    assert move["previous_path"] == "patches/keep.patch"
    assert (move["size"], move["sha256"]) == (None, None)  # no new content: the old is kept
    assert chmod == {
        "action": "chmod",
        "file_path": "kernel.spec",
        "execute_filemode": True,
        "previous_path": None,
        "encoding": None,
        "size": None,
        "sha256": None,
    }
    assert all("content" not in action for action in oldest["details"]["file_actions"])
