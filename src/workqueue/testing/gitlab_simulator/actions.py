"""The Commits API's `actions[]`: request validation and application to a tree.

Validation messages are those of `validate_commits_attrs!` in `lib/api/commits.rb`
(wrapped by `bad_request!`); application errors are Gitaly's index errors, which
GitLab returns verbatim as `{"message": ...}` with status 400.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from workqueue.testing.gitlab_simulator.errors import ApiError, api_error, bad_request
from workqueue.testing.gitlab_simulator.params import to_bool
from workqueue.testing.gitlab_simulator.repository import FileEntry, Repository

ACTIONS = ("create", "update", "move", "delete", "chmod")
_BASE64_NOISE = re.compile(rb"[^A-Za-z0-9+/]")


def _blank(value: Any) -> bool:
    """Ruby's `blank?`: nil, false, empty or whitespace-only."""
    if value is None or value is False:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, list | dict):
        return not value
    return False


def validate_commit_params(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`validate_commits_attrs!`: returns the actions with `encoding` defaulted."""
    for name in ("branch", "commit_message", "actions"):
        if _blank(params.get(name)):
            raise bad_request(f"{name} is required")
    actions = params["actions"]
    if not isinstance(actions, list):
        raise bad_request("actions must be an array")
    if "start_sha" in params and "start_branch" in params:
        raise bad_request("start_branch, start_sha are mutually exclusive")
    checked: list[dict[str, Any]] = []
    for index, raw in enumerate(actions):
        action = dict(raw) if isinstance(raw, dict) else {}
        if _blank(action.get("action")):
            raise bad_request(f"actions[{index}][action] is required")
        if _blank(action.get("file_path")):
            raise bad_request(f"actions[{index}][file_path] is required")
        error = _validate_action(action, index)
        if error is not None:
            raise bad_request(error)
        checked.append(action)
    return checked


def _validate_action(action: dict[str, Any], index: int) -> str | None:
    if action["action"] not in ACTIONS:
        return f"actions[{index}][action] must be one of: create, update, move, delete, chmod"
    action.setdefault("encoding", "text")
    if action["encoding"] not in {"text", "base64"}:
        return f"actions[{index}][encoding] must be text or base64"
    kind = action["action"]
    if kind == "update" and "content" not in action:
        return f"actions[{index}][content] is required for update action"
    if kind == "move" and _blank(action.get("previous_path")):
        return f"actions[{index}][previous_path] is required for move action"
    return _validate_chmod(action, index) if kind == "chmod" else None


def _validate_chmod(action: dict[str, Any], index: int) -> str | None:
    if "execute_filemode" not in action:
        return f"actions[{index}][execute_filemode] is required for chmod action"
    if action["execute_filemode"] not in (True, False, "true", "false"):
        return f"actions[{index}][execute_filemode] must be a boolean"
    action["execute_filemode"] = action["execute_filemode"] in (True, "true")
    return None


def decode_content(content: Any, encoding: str) -> bytes:
    """Text is stored as UTF-8; base64 is decoded leniently, like Ruby's `Base64.decode64`."""
    if content is None:
        return b""
    text = content if isinstance(content, str) else str(content)
    if encoding != "base64":
        return text.encode("utf-8")
    cleaned = _BASE64_NOISE.sub(b"", text.encode("ascii", errors="ignore"))
    cleaned = cleaned[: len(cleaned) - len(cleaned) % 4] if len(cleaned) % 4 == 1 else cleaned
    try:
        return base64.b64decode(cleaned + b"=" * (-len(cleaned) % 4))
    except binascii.Error:
        return b""


def check_path(path: str) -> None:
    """Gitaly's path checks, applied before touching the index."""
    parts = path.split("/")
    if ".." in parts:
        raise api_error(400, "Path cannot include directory traversal")
    if any(part in {"", "."} or part.lower() == ".git" for part in parts):
        raise api_error(400, f"invalid path: '{path}'")


def check_last_commit_ids(
    repo: Repository, start_sha: str | None, actions: list[dict[str, Any]]
) -> None:
    """`validate_file_status!`: `last_commit_id` must be the last commit touching the file."""
    if start_sha is None:
        return
    for action in actions:
        if action["action"] not in {"update", "move", "delete", "chmod"}:
            continue
        expected = action.get("last_commit_id")
        if not expected:
            continue
        path = action.get("previous_path") or action["file_path"]
        actual = repo.last_commit_for_path(start_sha, path)
        if actual is not None and actual != expected:
            raise api_error(400, f"The file has changed since you started editing it: {path}")


def _exists_error() -> ApiError:
    return api_error(400, "A file with this name already exists")


def _missing_error() -> ApiError:
    return api_error(400, "A file with this name doesn't exist")


def _check_creatable(tree: dict[str, FileEntry], path: str) -> None:
    if path in tree:
        raise _exists_error()
    if any(existing.startswith(path + "/") for existing in tree):
        raise api_error(400, "A directory with this name already exists")
    parts = path.split("/")
    if any("/".join(parts[:depth]) in tree for depth in range(1, len(parts))):
        # A parent directory of the new path is a file: git cannot hold both.
        raise _exists_error()


def apply_actions(
    base: Mapping[str, FileEntry], actions: list[dict[str, Any]]
) -> dict[str, FileEntry]:
    """Apply the actions in order (like Gitaly's index) and return the new tree."""
    tree = dict(base)
    for action in actions:
        kind = action["action"]
        path = str(action["file_path"])
        check_path(path)
        if kind == "create":
            _check_creatable(tree, path)
            content = decode_content(action.get("content"), action["encoding"])
            tree[path] = FileEntry(content, to_bool(action.get("execute_filemode")) is True)
        elif kind == "update":
            if path not in tree:
                raise _missing_error()
            content = decode_content(action.get("content"), action["encoding"])
            tree[path] = FileEntry(content, tree[path].executable)
        elif kind == "delete":
            if path not in tree:
                raise _missing_error()
            del tree[path]
        elif kind == "chmod":
            if path not in tree:
                raise _missing_error()
            tree[path] = FileEntry(tree[path].content, bool(action["execute_filemode"]))
        else:
            previous = str(action["previous_path"])
            check_path(previous)
            if previous not in tree:
                raise _missing_error()
            old = tree.pop(previous)
            _check_creatable(tree, path)
            # A move without content keeps the old bytes (GitLab's `infer_content`).
            content = (
                old.content
                if action.get("content") is None
                else decode_content(action["content"], action["encoding"])
            )
            tree[path] = FileEntry(content, old.executable)
    return tree
