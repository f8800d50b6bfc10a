"""A git-like object model: immutable commits that each hold a full file tree, and branches.

Storing the whole tree per commit (instead of deltas) keeps every question the API
asks — diffs, merges, "last commit touching a path" — a plain comparison of two
dictionaries, which is plenty fast for the repositories tests build.

Ancestry is answered without walking history, because the chaos suite builds
histories of thousands of merges and asks about them on every MR read: each
commit keeps the set of its ancestors as a bitmask (an int with bit `serial`
set for every reachable commit), computed once from its parents' masks. Results
that depend only on commits (conflicts of a merge, an MR's diff) are memoised
by sha in `memo`; commits never change, so those keys never go stale.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TypeVar, cast

_T = TypeVar("_T")
# Memoised results kept per repository; past this the oldest half is dropped.
MEMO_LIMIT = 50_000

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

    @cached_property
    def blob_id(self) -> str:
        # git's own blob id, so equal content has an equal id, as on a real server.
        # Cached: every new commit digests its whole tree.
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


_DIGEST_MODULUS = 1 << 160


def entry_digest(path: str, entry: FileEntry) -> int:
    line = f"{entry.mode} {entry.blob_id} {path}"
    return int.from_bytes(hashlib.sha1(line.encode(), usedforsecurity=False).digest())


def tree_digest(tree: Tree) -> int:
    """A digest of the tree's content: the sum of its entries' digests, so that a
    commit's digest follows from its parent's and the few paths it changed."""
    return sum(entry_digest(path, entry) for path, entry in tree.items()) % _DIGEST_MODULUS


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
        # Bit `serial` of `_reach[sha]` is set for every commit reachable from sha.
        self._reach: dict[str, int] = {}
        self._by_serial: dict[int, str] = {}
        self._memo: dict[tuple[str, Hashable], object] = {}
        self._digests: dict[str, int] = {}

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
        digest = self._digest(tree, parent_ids)
        material = "\n".join(
            [
                str(serial),
                " ".join(parent_ids),
                f"{digest:040x}",
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
        reach = 1 << serial
        for parent in parent_ids:
            reach |= self._reach[parent]
        self.commits[commit.id] = commit
        self._reach[commit.id] = reach
        self._by_serial[serial] = commit.id
        self._digests[commit.id] = digest
        return commit

    def _digest(self, tree: Tree, parent_ids: tuple[str, ...]) -> int:
        """`tree_digest(tree)`, from the first parent's digest and the paths that differ."""
        if not parent_ids:
            return tree_digest(tree)
        parent_tree = self.commits[parent_ids[0]].tree
        total = self._digests[parent_ids[0]]
        for path, entry in tree.items():
            old = parent_tree.get(path)
            if old is not entry:  # unchanged entries are shared with the parent's tree
                if old is not None:
                    total -= entry_digest(path, old)
                total += entry_digest(path, entry)
        for path in parent_tree.keys() - tree.keys():
            total -= entry_digest(path, parent_tree[path])
        return total % _DIGEST_MODULUS

    def memo(self, kind: str, key: Hashable, compute: Callable[[], _T]) -> _T:
        """`compute()`, remembered under (kind, key); key must name commits by sha only."""
        slot = (kind, key)
        if slot in self._memo:
            return cast("_T", self._memo[slot])
        value = compute()
        if len(self._memo) >= MEMO_LIMIT:
            for old in list(itertools.islice(self._memo, MEMO_LIMIT // 2)):
                del self._memo[old]
        self._memo[slot] = value
        return value

    def _shas(self, mask: int) -> set[str]:
        bits = bin(mask)[:1:-1]  # least significant bit first
        return {self._by_serial[serial] for serial, bit in enumerate(bits) if bit == "1"}

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
        return self._shas(self._reach[sha])

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        serial = self.commits[ancestor].serial if ancestor in self.commits else None
        reach = self._reach[descendant]
        return serial is not None and bool(reach >> serial & 1)

    def merge_base(self, left: str, right: str) -> str | None:
        """The best common ancestor (one that is not an ancestor of another common one)."""
        common = self._reach[left] & self._reach[right]
        if not common:
            return None
        # The newest common commit is always a best one: no common commit can descend from it.
        return self._by_serial[common.bit_length() - 1]

    def log(self, include: str, exclude: str | None = None) -> list[Commit]:
        """`git log exclude..include`, newest first (creation order stands in for topology)."""
        reachable = self._reach[include]
        if exclude is not None:
            reachable &= ~self._reach[exclude]
        return sorted(
            (self.commits[sha] for sha in self._shas(reachable)),
            key=lambda c: c.serial,
            reverse=True,
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
