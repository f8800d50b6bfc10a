"""What an `mr` submission makes the service store, in bytes, and what retention keeps."""

from __future__ import annotations

from typing import Any

import pytest

from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.stored_bytes import (
    bytes_dropped_by_retention,
    bytes_kept,
    stored_bytes,
)

_TITLE, _MESSAGE, _PATH = "Sync", "Sync from upstream", "kernel.spec"
_BASE = len(_TITLE) + len(_MESSAGE) + len(_PATH)


def _submission(**overrides: Any) -> MRWorkItemCreate:
    body: dict[str, Any] = {
        "project": "group/project",
        "source_branch": "workqueue/sync",
        "title": _TITLE,
        "commit_message": _MESSAGE,
        "file_actions": [{"action": "delete", "file_path": _PATH}],
        **overrides,
    }
    return MRWorkItemCreate.model_validate(body)


@pytest.mark.parametrize(
    ("overrides", "kept", "dropped"),
    [
        # A delete-only submission still stores its texts.
        ({}, len(_TITLE) + len(_PATH), len(_MESSAGE)),
        ({"description": "x" * 1000}, len(_TITLE) + len(_PATH), len(_MESSAGE) + 1000),
        ({"description": ""}, len(_TITLE) + len(_PATH), len(_MESSAGE)),
        # UTF-8 bytes, not characters: "é" is 2, "€" 3, "😀" 4.
        ({"title": "é€😀"}, 9 + len(_PATH), len(_MESSAGE)),
        ({"labels": ["bot", "bot", "süß"]}, _BASE - len(_MESSAGE) + 3 + 3 + 5, len(_MESSAGE)),
        ({"package": "kernel", "change_kind": "sync"}, _BASE - len(_MESSAGE) + 10, len(_MESSAGE)),
        (
            {
                "file_actions": [
                    {"action": "update", "file_path": "a.txt", "content": "v2\n"},
                    {
                        "action": "create",
                        "file_path": "b.bin",
                        "content": "aGkK",
                        "encoding": "base64",
                    },
                    {"action": "move", "file_path": "new/c", "previous_path": "old/c"},
                    {"action": "move", "file_path": "d2", "previous_path": "d1", "content": "é"},
                    {"action": "chmod", "file_path": "run.sh", "execute_filemode": True},
                ]
            },
            # paths: a.txt b.bin new/c old/c d2 d1 run.sh
            len(_TITLE) + 5 + 5 + 5 + 5 + 2 + 2 + 6,
            # contents as stored: "v2\n", base64 text as sent, "é" (2 bytes)
            len(_MESSAGE) + 3 + 4 + 2,
        ),
        # The project and branches are not counted: they name where the change goes
        # (bounded by the branch and path rules); the service fills the target itself.
        (
            {"project": "g/" + "p" * 200, "target_branch": "release-" + "9" * 100},
            len(_TITLE) + len(_PATH),
            len(_MESSAGE),
        ),
    ],
    ids=[
        "delete-only",
        "description",
        "empty-description",
        "utf8-title",
        "labels-each-as-given",
        "package-and-change-kind",
        "every-file-action",
        "addressing-not-counted",
    ],
)
def test_stored_bytes_are_what_retention_keeps_plus_what_it_drops(
    overrides: dict[str, Any], kept: int, dropped: int
) -> None:
    submission = _submission(**overrides)
    assert bytes_kept(submission) == kept
    assert bytes_dropped_by_retention(submission) == dropped
    assert stored_bytes(submission) == kept + dropped


def test_a_length_never_raises_on_text_the_policy_refuses() -> None:
    # A lone surrogate (from a "\ud800" escape) is refused by the policy; counting
    # it first must not raise.
    assert stored_bytes(_submission(description="\ud800")) == _BASE + 3
