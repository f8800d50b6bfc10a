"""`submit`'s file flags turned into the `file_actions` of the submit body.

`--file LOCAL:REPO` (update) and `--create LOCAL:REPO` read the local file now;
content that is not UTF-8 text, or that holds a NUL byte, travels as base64.
Repository paths are sent as given: the service validates them (and answers a
422 naming the action), so the rules live in one place.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workqueue.cli.client_http import UsageError


@dataclass(frozen=True)
class PlannedAction:
    """One file action and the flag it came from (to point at it in error messages)."""

    body: dict[str, Any]
    origin: str


def plan_file_actions(
    *, updates: list[str], creates: list[str], deletes: list[str], moves: list[str]
) -> list[PlannedAction]:
    """Actions in flag order: every --file, then --create, --delete, --move."""
    planned = [_content_action("update", "--file", spec) for spec in updates]
    planned += [_content_action("create", "--create", spec) for spec in creates]
    planned += [_delete_action(path) for path in deletes]
    planned += [_move_action(spec) for spec in moves]
    return planned


def encode_content(data: bytes) -> tuple[str, str]:
    """(content, encoding): text when the bytes are UTF-8 without NUL, else base64."""
    if b"\0" not in data:
        try:
            return data.decode("utf-8"), "text"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(data).decode("ascii"), "base64"


def _content_action(action: str, flag: str, spec: str) -> PlannedAction:
    # Split at the last colon: a repository path rarely holds one, a local path
    # sometimes does (C:\..., URLs-as-names).
    local, separator, repo_path = spec.rpartition(":")
    if not separator or not local or not repo_path:
        raise UsageError(f"{flag} {spec!r}: expected LOCAL:REPO, e.g. ./kernel.spec:kernel.spec")
    try:
        data = Path(local).expanduser().read_bytes()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise UsageError(f"{flag} {spec!r}: cannot read {local}: {reason}") from None
    content, encoding = encode_content(data)
    body = {"action": action, "file_path": repo_path, "content": content, "encoding": encoding}
    return PlannedAction(body, f"{flag} {spec}")


def _delete_action(repo_path: str) -> PlannedAction:
    if not repo_path:
        raise UsageError("--delete needs a repository path")
    return PlannedAction({"action": "delete", "file_path": repo_path}, f"--delete {repo_path}")


def _move_action(spec: str) -> PlannedAction:
    # Both sides are repository paths, so there is no side to prefer: exactly one colon.
    old, separator, new = spec.partition(":")
    if not separator or not old or not new or ":" in new:
        raise UsageError(f"--move {spec!r}: expected OLD:NEW with a single colon")
    return PlannedAction(
        {"action": "move", "file_path": new, "previous_path": old}, f"--move {spec}"
    )
