"""Three-way merges of trees and of text files, for MR merges, conflicts and rebases.

Text files merge line by line with the classic diff3 "sync region" method: lines
unchanged on both sides anchor the merge, and between anchors a side that did not
touch the base wins. As in git, changes on adjacent lines (no unchanged line
between them) conflict. Binary files only merge when one side left them alone.
"""

from __future__ import annotations

from difflib import SequenceMatcher

from workqueue.testing.gitlab_simulator.diffs import is_text
from workqueue.testing.gitlab_simulator.repository import FileEntry, Tree

_Region = tuple[int, int, int, int, int, int]


def _sync_regions(base: list[str], ours: list[str], theirs: list[str]) -> list[_Region]:
    """Base ranges matched in both sides, as (base, ours, theirs) start/end triples."""
    ours_blocks = SequenceMatcher(None, base, ours, autojunk=False).get_matching_blocks()
    theirs_blocks = SequenceMatcher(None, base, theirs, autojunk=False).get_matching_blocks()
    regions: list[_Region] = []
    i = j = 0
    while i < len(ours_blocks) and j < len(theirs_blocks):
        o_base, o_start, o_len = ours_blocks[i]
        t_base, t_start, t_len = theirs_blocks[j]
        start = max(o_base, t_base)
        end = min(o_base + o_len, t_base + t_len)
        if start < end:
            o_sub = o_start + start - o_base
            t_sub = t_start + start - t_base
            length = end - start
            regions.append((start, end, o_sub, o_sub + length, t_sub, t_sub + length))
        if o_base + o_len < t_base + t_len:
            i += 1
        else:
            j += 1
    regions.append((len(base), len(base), len(ours), len(ours), len(theirs), len(theirs)))
    return regions


def merge_lines(base: list[str], ours: list[str], theirs: list[str]) -> list[str] | None:
    """The merged lines, or None when both sides changed the same region differently."""
    merged: list[str] = []
    z = o = t = 0
    for z_start, z_end, o_start, o_end, t_start, t_end in _sync_regions(base, ours, theirs):
        base_chunk, ours_chunk, theirs_chunk = base[z:z_start], ours[o:o_start], theirs[t:t_start]
        if theirs_chunk in (ours_chunk, base_chunk):
            merged.extend(ours_chunk)
        elif ours_chunk == base_chunk:
            merged.extend(theirs_chunk)
        else:
            return None
        merged.extend(base[z_start:z_end])
        z, o, t = z_end, o_end, t_end
    return merged


def merge_contents(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    if theirs in (ours, base):
        return ours
    if ours == base:
        return theirs
    if not (is_text(base) and is_text(ours) and is_text(theirs)):
        return None
    lines = merge_lines(
        base.decode("utf-8").splitlines(keepends=True),
        ours.decode("utf-8").splitlines(keepends=True),
        theirs.decode("utf-8").splitlines(keepends=True),
    )
    return None if lines is None else "".join(lines).encode("utf-8")


def _merge_entry(
    base: FileEntry | None, ours: FileEntry | None, theirs: FileEntry | None
) -> tuple[FileEntry | None, bool]:
    """(result, conflicted) for one path."""
    if theirs in (ours, base):
        return ours, False
    if ours == base:
        return theirs, False
    if ours is None or theirs is None:
        # Modified on one side, deleted on the other: git's modify/delete conflict.
        return None, True
    base_content = base.content if base is not None else b""
    content = merge_contents(base_content, ours.content, theirs.content)
    if content is None:
        return None, True
    base_exec = base.executable if base is not None else False
    executable = theirs.executable if ours.executable == base_exec else ours.executable
    return FileEntry(content, executable), False


def merge_trees(base: Tree, ours: Tree, theirs: Tree) -> tuple[dict[str, FileEntry], list[str]]:
    """The merged tree and the sorted list of conflicting paths (empty when clean)."""
    # A path where theirs holds the very entry object of base merges to ours (the first
    # rule of `_merge_entry`), so only the paths theirs touched need a look. Trees share
    # unchanged entries with their parents, so that is a few paths, not the whole tree.
    touched = {path for path, entry in theirs.items() if base.get(path) is not entry}
    touched.update(base.keys() - theirs.keys())
    merged = dict(ours)
    conflicts: list[str] = []
    for path in sorted(touched):
        entry, conflicted = _merge_entry(base.get(path), ours.get(path), theirs.get(path))
        if conflicted:
            conflicts.append(path)
        if entry is None:
            merged.pop(path, None)
        else:
            merged[path] = entry
    return merged, conflicts
