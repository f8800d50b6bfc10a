"""Whether a commit the service did not just push carries exactly the item's content.

Git lets whoever pushes write any author, committer and message, and the
service's commit message (its stamp and content hash included) is public in
the MR. So `authorship` can tell a person's ordinary work from the service's,
but not a commit dressed up as the service's on purpose. Where the service
adopts a head it did not record from its own push — GitLab's rebase of its
commit (`mr_rebase`), or its own push whose answer a crash lost, found again
on a resubmission (`ensure_mr`) — it first checks the content, so that what
it merges is what the caller submitted, whoever made the commit:

* the commit has one parent, and the parent..commit diff touches no path
  outside the item's file actions;
* every path the actions name ends as they leave it: a create or update (or
  a move with content) has the submitted content (sha256 of the decoded
  text), a delete or a move's old path is gone, a move without content holds
  the moved file, and the executable bit is what a `chmod` set, else the
  parent's (off for a new file).

Cost: one compare and one file read per path at the commit, plus one at the
parent per update, move or chmod; paid only when adopting such a head (a
rebase, a crash), never on the common path.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workqueue.gitlab.client import GitLabClient, ProjectRef
from workqueue.gitlab.models import CommitInfo


@dataclass(frozen=True, slots=True)
class _File:
    content_sha256: str
    executable: bool


class _Mismatch(Exception):  # noqa: N818 - control flow: the reason, to the caller
    pass


def content_mismatch(
    gitlab: GitLabClient,
    project: ProjectRef,
    commit: CommitInfo,
    actions: Sequence[Mapping[str, Any]],
) -> str | None:
    """Why `commit` is not exactly `actions` applied to its one parent; None when it is."""
    if len(commit.parent_ids) != 1:
        return f"it has {len(commit.parent_ids)} parents, not one"
    parent = commit.parent_ids[0]
    expected = _Expected(gitlab, project, parent)
    try:
        for action in actions:
            expected.apply(action)
    except _Mismatch as mismatch:
        return str(mismatch)
    compare = gitlab.compare(project, parent, commit.sha, straight=True)
    if compare.timed_out:
        return "GitLab could not compute its diff"
    stray = [path for path in compare.changed_paths if path not in expected.files]
    if stray:
        return f"it also changes {stray[0]}"
    for path, want in expected.files.items():
        if _file(gitlab, project, path, commit.sha) != want:
            return f"{path} is not as the submission leaves it"
    return None


class _Expected:
    """The files the actions name, as they leave them on top of the parent."""

    def __init__(self, gitlab: GitLabClient, project: ProjectRef, parent: str) -> None:
        self._gitlab, self._project, self._parent = gitlab, project, parent
        self.files: dict[str, _File | None] = {}

    def _before(self, path: str) -> _File | None:
        if path in self.files:
            return self.files[path]
        return _file(self._gitlab, self._project, path, self._parent)

    def apply(self, action: Mapping[str, Any]) -> None:
        kind, path = action.get("action"), str(action.get("file_path"))
        if kind == "delete":
            self.files[path] = None
            return
        if kind == "chmod":
            old = self._before(path)
            if old is None:
                raise _Mismatch(f"{path} is not there to chmod")
            self.files[path] = _File(old.content_sha256, bool(action.get("execute_filemode")))
            return
        if kind not in {"create", "update", "move"}:
            raise _Mismatch(f"unknown file action {kind!r}")
        source = str(action.get("previous_path")) if kind == "move" else path
        old = None if kind == "create" else self._before(source)
        content = _content_sha256(action) if action.get("content") is not None else None
        if content is None and kind == "move" and old is not None:
            content = old.content_sha256  # a move without content keeps the file
        if content is None:
            raise _Mismatch(f"the content of {path} is neither submitted nor there to move")
        if kind == "move":
            self.files[source] = None
        self.files[path] = _File(content, old.executable if old is not None else False)


def _file(gitlab: GitLabClient, project: ProjectRef, path: str, ref: str) -> _File | None:
    found = gitlab.file_fingerprint(project, path, ref)
    return None if found is None else _File(found.content_sha256, found.executable)


def _content_sha256(action: Mapping[str, Any]) -> str | None:
    content = action.get("content")
    if not isinstance(content, str):
        return None
    if action.get("encoding") == "base64":
        try:
            data = base64.b64decode(content)  # as leniently as GitLab decodes it
        except (binascii.Error, ValueError):
            return None
    else:
        data = content.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()
