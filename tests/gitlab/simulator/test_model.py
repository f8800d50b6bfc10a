"""The simulator's git model without HTTP: diffs, three-way merges, refs, CI status."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from workqueue.testing.gitlab_simulator.ci import composite_status
from workqueue.testing.gitlab_simulator.diffs import diff_trees, unified_patch
from workqueue.testing.gitlab_simulator.merge3 import merge_contents, merge_trees
from workqueue.testing.gitlab_simulator.repository import (
    FileEntry,
    Repository,
    Signature,
    is_valid_branch_name,
)
from workqueue.testing.gitlab_simulator.state import Job, User

WHEN = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
ME = Signature("Me", "me@example.com")


def test_patch_follows_git_conventions():
    patch, added, removed = unified_patch(b"a\nb\n", b"a\nc", "f", "f")
    assert patch == "@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"
    assert (added, removed) == (1, 1)
    assert unified_patch(b"", b"x\n", "f", "f")[0] == "@@ -0,0 +1 @@\n+x\n"
    assert unified_patch(b"\x00\x01", b"\x00\x02", "a.bin", "a.bin")[0] == (
        "Binary files a/a.bin and b/a.bin differ\n"
    )


def test_patch_keeps_three_lines_of_context():
    old = "".join(f"{n}\n" for n in range(20)).encode()
    new = old.replace(b"10\n", b"ten\n")
    patch = unified_patch(old, new, "f", "f")[0]
    assert patch.splitlines()[0] == "@@ -8,7 +8,7 @@"
    assert patch.count("\n") == 9


def test_tree_diff_modes_and_flags():
    old = {"keep": FileEntry(b"1"), "gone": FileEntry(b"2"), "mode": FileEntry(b"3")}
    new = {
        "keep": FileEntry(b"1"),
        "added": FileEntry(b"4", executable=True),
        "mode": FileEntry(b"3", executable=True),
    }
    diffs = {d.new_path: d for d in diff_trees(old, new)}
    assert set(diffs) == {"added", "gone", "mode"}
    assert (diffs["added"].a_mode, diffs["added"].b_mode, diffs["added"].new_file) == (
        "0",
        "100755",
        True,
    )
    assert (diffs["gone"].b_mode, diffs["gone"].deleted_file) == ("0", True)
    assert (diffs["mode"].a_mode, diffs["mode"].b_mode, diffs["mode"].diff) == (
        "100644",
        "100755",
        "",
    )


BASE = "1\n2\n3\n4\n5\n"


@pytest.mark.parametrize(
    ("base", "ours", "theirs", "merged"),
    [
        (BASE, BASE, BASE, BASE),
        (BASE, "X\n2\n3\n4\n5\n", "1\n2\n3\n4\nY\n", "X\n2\n3\n4\nY\n"),
        (BASE, "X\n2\n3\n4\n5\n", "X\n2\n3\n4\n5\n", "X\n2\n3\n4\n5\n"),
        (BASE, "X\n2\n3\n4\n5\n", "1\nY\n3\n4\n5\n", None),  # adjacent lines conflict, as in git
        (BASE, "X\n2\n3\n4\n5\n", "Y\n2\n3\n4\n5\n", None),
        (BASE, "1\n2\n4\n5\n", "1\n2\n3\n4\n5\n6\n", "1\n2\n4\n5\n6\n"),
        ("", "a\n", "b\n", None),  # add/add with different content
    ],
)
def test_three_way_text_merge(base, ours, theirs, merged):
    result = merge_contents(base.encode(), ours.encode(), theirs.encode())
    assert result == (merged.encode() if merged is not None else None)


def test_tree_merge_reports_modify_delete_conflicts():
    base = {"a": FileEntry(b"1\n"), "b": FileEntry(b"x\n")}
    ours = {"a": FileEntry(b"2\n"), "b": FileEntry(b"x\n")}
    theirs = {"b": FileEntry(b"y\n"), "c": FileEntry(b"new\n")}
    merged, conflicts = merge_trees(base, ours, theirs)
    assert conflicts == ["a"]
    assert merged == {"b": FileEntry(b"y\n"), "c": FileEntry(b"new\n")}


def test_merge_base_and_log():
    repo = Repository()
    root = repo.create_commit(
        tree={}, parent_ids=(), message="root", author=ME, committer=ME, when=WHEN
    )
    left = repo.create_commit(
        tree={"l": FileEntry(b"")},
        parent_ids=(root.id,),
        message="l",
        author=ME,
        committer=ME,
        when=WHEN,
    )
    right = repo.create_commit(
        tree={"r": FileEntry(b"")},
        parent_ids=(root.id,),
        message="r",
        author=ME,
        committer=ME,
        when=WHEN,
    )
    assert repo.merge_base(left.id, right.id) == root.id
    assert [c.id for c in repo.log(left.id, exclude=right.id)] == [left.id]
    assert repo.resolve(left.id[:8]) == left.id
    assert repo.resolve("nope") is None
    assert left.id != right.id


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("bot/bump", True),
        ("a..b", False),
        ("-x", False),
        ("x.lock", False),
        ("a b", False),
        ("ends/", False),
        ("a//b", False),
        ("HEAD", False),
        (".hidden", False),
        ("x@{1}", False),
    ],
)
def test_branch_name_rules(name, valid):
    assert is_valid_branch_name(name) is valid


def _job(status, *, allow_failure=False):
    user = User(1, "u", "U", "u@example.com")
    return Job(
        id=1,
        pipeline_id=1,
        project_id=1,
        name="j",
        stage="s",
        status=status,
        user=user,
        created_at=WHEN,
        allow_failure=allow_failure,
    )


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], "created"),
        (["success", "skipped"], "success"),
        (["skipped"], "skipped"),
        (["success", "failed"], "failed"),
        (["success", "running"], "running"),
        (["pending", "created"], "pending"),
        (["success", "pending"], "running"),
        (["success", "canceled"], "canceled"),
        (["failed", "canceled"], "failed"),
        (["success", "manual"], "manual"),
    ],
)
def test_pipeline_status_composition(statuses, expected):
    assert composite_status([_job(s) for s in statuses]) == expected


def test_allowed_failures_do_not_fail_the_pipeline():
    assert composite_status([_job("success"), _job("failed", allow_failure=True)]) == "success"
