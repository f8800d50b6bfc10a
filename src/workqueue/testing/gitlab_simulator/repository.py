"""A git-like object model: immutable commits that each hold a full file tree, and branches.

Storing the whole tree per commit (instead of deltas) keeps every question the API
asks — diffs, merges, "last commit touching a path" — a plain comparison of two
dictionaries, which is plenty fast for the repositories tests build.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

ZERO_SHA = "0" * 40
_FULL_SHA = re.compile(r"[0-9a-f]{40}")
_SHORT_SHA = re.compile(r"[0-9a-f]{7,40}")
_MR_REF = re.compile(r"refs/merge-requests/(\d+)/head")


@dataclass(frozen=True)
class FileEntry:
    """One blob in a tree: its bytes and whether git would record mode 100755."""

    content: bytes
    executable: bool = False

    @property
    def mode(self) -> str:
        return "100755" if self.executable else "100644"

    @property
    def blob_id(self) -> str:
        # git's own blob id, so equal content has an equal id, as on a real server.
        header = f"blob {len(self.content)}\0".encode()
        return hashlib.sha1(header + self.content, usedforsecurity=False).hexdigest()


Tree = Mapping[str, FileEntry]


@dataclass(frozen=True)
class Signature:
    name: str
    email: str


@dataclass(frozen=True, eq=False)
class Commit:
    """An immutable commit; `serial` orders commits by creation for `git log`-like output."""

    id: str
    serial: int
    parent_ids: tuple[str, ...]
    tree: Tree
    message: str
    author: Signature
    authored_at: datetime
    committer: Signature
    committed_at: datetime

    @property
    def short_id(self) -> str:
        return self.id[:8]

    @property
    def title(self) -> str:
        return self.message.split("\n", 1)[0]


def tree_digest(tree: Tree) -> str:
    lines = (f"{entry.mode} {entry.blob_id} {path}" for path, entry in sorted(tree.items()))
    return hashlib.sha1("\n".join(lines).encode(), usedforsecurity=False).hexdigest()


_INVALID_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def is_valid_branch_name(name: str) -> bool:
    """The rules of `git check-ref-format --branch`, which GitLab applies to new branches."""
    if not name or name in {"HEAD", "@"} or name.startswith(("-", "/")) or name.endswith("/"):
        return False
    if ".." in name or "@{" in name or "//" in name or name.endswith("."):
        return False
    if _INVALID_REF_CHARS.search(name):
        return False
    return all(not part.startswith(".") and not part.endswith(".lock") for part in name.split("/"))


class Repository:
    """Commits by id plus branch pointers; callers hold the simulator lock."""

    def __init__(self) -> None:
        self.commits: dict[str, Commit] = {}
        self.branches: dict[str, str] = {}
        self._serial = itertools.count(1)

    @property
    def empty(self) -> bool:
        """GitLab's `empty_repo?`: no commit has been pushed yet."""
        return not self.commits

    def create_commit(
        self,
        *,
        tree: Tree,
        parent_ids: tuple[str, ...],
        message: str,
        author: Signature,
        committer: Signature,
        when: datetime,
    ) -> Commit:
        serial = next(self._serial)
        material = "\n".join(
            [
                str(serial),
                " ".join(parent_ids),
                tree_digest(tree),
                message,
                f"{author.name} <{author.email}>",
                when.isoformat(),
            ]
        )
        commit = Commit(
            id=hashlib.sha1(material.encode(), usedforsecurity=False).hexdigest(),
            serial=serial,
            parent_ids=parent_ids,
            tree=dict(tree),
            message=message,
            author=author,
            authored_at=when,
            committer=committer,
            committed_at=when,
        )
        self.commits[commit.id] = commit
        return commit

    def resolve(self, ref: str, mr_heads: Mapping[int, str] | None = None) -> str | None:
        """A branch name, `refs/heads/<b>`, `HEAD` (via the caller), a full or short sha.

        `mr_heads` maps MR iids to their head sha so `refs/merge-requests/<iid>/head`
        resolves like the hidden ref GitLab keeps for each MR.
        """
        if ref in self.branches:
            return self.branches[ref]
        if ref.startswith("refs/heads/") and ref[len("refs/heads/") :] in self.branches:
            return self.branches[ref[len("refs/heads/") :]]
        match = _MR_REF.fullmatch(ref)
        if match and mr_heads is not None:
            return mr_heads.get(int(match.group(1)))
        if _FULL_SHA.fullmatch(ref):
            return ref if ref in self.commits else None
        if _SHORT_SHA.fullmatch(ref):
            found = [sha for sha in self.commits if sha.startswith(ref)]
            return found[0] if len(found) == 1 else None
        return None

    def ancestors(self, sha: str) -> set[str]:
        """Every commit reachable from `sha`, itself included."""
        seen: set[str] = set()
        stack = [sha]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(self.commits[current].parent_ids)
        return seen

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return ancestor in self.ancestors(descendant)

    def merge_base(self, left: str, right: str) -> str | None:
        """The best common ancestor (one that is not an ancestor of another common one)."""
        common = self.ancestors(left) & self.ancestors(right)
        if not common:
            return None
        # The newest common commit is always a best one: no common commit can descend from it.
        return max(common, key=lambda sha: self.commits[sha].serial)

    def log(self, include: str, exclude: str | None = None) -> list[Commit]:
        """`git log exclude..include`, newest first (creation order stands in for topology)."""
        reachable = self.ancestors(include)
        if exclude is not None:
            reachable -= self.ancestors(exclude)
        return sorted(
            (self.commits[sha] for sha in reachable), key=lambda c: c.serial, reverse=True
        )

    def last_commit_for_path(self, sha: str, path: str) -> str | None:
        """The newest commit on the first-parent chain that changed `path` (None if absent)."""
        commit = self.commits[sha]
        entry = commit.tree.get(path)
        if entry is None:
            return None
        while commit.parent_ids:
            parent = self.commits[commit.parent_ids[0]]
            if parent.tree.get(path) != entry:
                break
            commit = parent
        return commit.id

    def is_merged_into(self, branch: str, target: str) -> bool:
        """Branch entity's `merged`: the branch head is reachable from the target branch."""
        head = self.branches.get(branch)
        target_head = self.branches.get(target)
        if head is None or target_head is None or branch == target:
            return False
        return self.is_ancestor(head, target_head)
