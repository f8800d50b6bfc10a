"""Diffs between two trees, rendered the way GitLab's API returns them.

Each entry has GitLab's `Entities::Diff` fields; `diff` is git's unified patch
without the `---`/`+++` header lines (GitLab strips them), with three lines of
context, git's hunk-range rules and the `\\ No newline at end of file` marker.
Renames are detected only for identical content (git's 100% similarity case);
a moved-and-edited file appears as a delete plus a create.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from workqueue.testing.gitlab_simulator.repository import FileEntry, Tree

_CONTEXT_LINES = 3


@dataclass(frozen=True)
class FileDiff:
    old_path: str
    new_path: str
    a_mode: str
    b_mode: str
    diff: str
    new_file: bool
    renamed_file: bool
    deleted_file: bool
    additions: int
    deletions: int

    def as_json(self) -> dict[str, Any]:
        return {
            "diff": self.diff,
            "new_path": self.new_path,
            "old_path": self.old_path,
            "a_mode": self.a_mode,
            "b_mode": self.b_mode,
            "new_file": self.new_file,
            "renamed_file": self.renamed_file,
            "deleted_file": self.deleted_file,
            "generated_file": False,
        }


def is_text(content: bytes) -> bool:
    """git's heuristic (no NUL byte) plus UTF-8, since the JSON API carries text."""
    if b"\0" in content:
        return False
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _range(start: int, stop: int) -> str:
    length = stop - start
    first = start + 1
    if length == 0:
        return f"{first - 1},0"
    if length == 1:
        return str(first)
    return f"{first},{length}"


def _emit(prefix: str, line: str) -> str:
    if line.endswith("\n"):
        return prefix + line
    return f"{prefix}{line}\n\\ No newline at end of file\n"


def unified_patch(old: bytes, new: bytes, old_path: str, new_path: str) -> tuple[str, int, int]:
    """The patch text plus (additions, deletions) as counted by `git diff --numstat`."""
    if not (is_text(old) and is_text(new)):
        if old == new:
            return "", 0, 0
        return f"Binary files a/{old_path} and b/{new_path} differ\n", 0, 0
    a = old.decode("utf-8").splitlines(keepends=True)
    b = new.decode("utf-8").splitlines(keepends=True)
    parts: list[str] = []
    additions = deletions = 0
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(_CONTEXT_LINES):
        first, last = group[0], group[-1]
        parts.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                parts.extend(_emit(" ", line) for line in a[i1:i2])
                continue
            if tag in {"replace", "delete"}:
                parts.extend(_emit("-", line) for line in a[i1:i2])
                deletions += i2 - i1
            if tag in {"replace", "insert"}:
                parts.extend(_emit("+", line) for line in b[j1:j2])
                additions += j2 - j1
    return "".join(parts), additions, deletions


def _entry_diff(
    old_path: str, new_path: str, old: FileEntry | None, new: FileEntry | None
) -> FileDiff:
    old_content = old.content if old is not None else b""
    new_content = new.content if new is not None else b""
    patch, additions, deletions = unified_patch(old_content, new_content, old_path, new_path)
    return FileDiff(
        old_path=old_path,
        new_path=new_path,
        a_mode=old.mode if old is not None else "0",
        b_mode=new.mode if new is not None else "0",
        diff=patch,
        new_file=old is None,
        renamed_file=old is not None and new is not None and old_path != new_path,
        deleted_file=new is None,
        additions=additions,
        deletions=deletions,
    )


def diff_trees(old: Tree, new: Tree) -> list[FileDiff]:
    """Every changed path, ordered by path like git; exact-content moves become renames."""
    removed = sorted(old.keys() - new.keys())
    added = sorted(new.keys() - old.keys())
    # Trees share unchanged entries with their parents: the identity test skips those cheaply.
    changed = sorted(
        path
        for path, entry in new.items()
        if (before := old.get(path)) is not entry and before is not None and before != entry
    )
    renames: dict[str, str] = {}
    for new_path in added:
        for old_path in removed:
            if old_path not in renames.values() and old[old_path] == new[new_path]:
                renames[new_path] = old_path
                break
    diffs = [_entry_diff(path, path, old[path], new[path]) for path in changed]
    for path in added:
        source = renames.get(path)
        if source is None:
            diffs.append(_entry_diff(path, path, None, new[path]))
        else:
            diffs.append(_entry_diff(source, path, old[source], new[path]))
    renamed_sources = set(renames.values())
    diffs.extend(
        _entry_diff(path, path, old[path], None) for path in removed if path not in renamed_sources
    )
    return sorted(diffs, key=lambda d: d.new_path)
