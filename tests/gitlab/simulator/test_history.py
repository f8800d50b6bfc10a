"""Ancestry without history walks, and the per-sha memos: the same answers as the plain
algorithms, and a moved branch is a new question, never a remembered answer."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from workqueue.testing.gitlab_simulator import repository
from workqueue.testing.gitlab_simulator.repository import (
    FileEntry,
    Repository,
    Signature,
    tree_digest,
)

WHEN = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
ME = Signature("Me", "me@example.com")
BRANCH = "bot/readme"


def walk(repo: Repository, sha: str) -> set[str]:
    """The reference: every commit reachable from sha, by following parents."""
    seen: set[str] = set()
    stack = [sha]
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(repo.commits[current].parent_ids)
    return seen


def random_history(seed: int, size: int) -> Repository:
    """Roots, linear runs, merges and trees that add, change and drop files."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible shape, not a secret
    repo = Repository()
    shas: list[str] = []
    for index in range(size):
        if not shas or rng.random() < 0.05:
            parents: tuple[str, ...] = ()
        elif rng.random() < 0.3 and len(shas) > 1:
            parents = tuple(rng.sample(shas, 2))
        else:
            parents = (rng.choice(shas[-10:]),)
        tree = dict(repo.commits[parents[0]].tree) if parents else {}
        if tree and rng.random() < 0.3:
            tree.pop(rng.choice(sorted(tree)))
        tree[f"f{rng.randrange(8)}"] = FileEntry(f"{index}\n".encode(), rng.random() < 0.1)
        commit = repo.create_commit(
            tree=tree, parent_ids=parents, message=f"c{index}", author=ME, committer=ME, when=WHEN
        )
        shas.append(commit.id)
    return repo


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ancestry_answers_match_a_walk(seed):
    repo = random_history(seed, 120)
    shas = list(repo.commits)
    pairs = random.Random(seed).sample(  # noqa: S311
        [(a, b) for a in shas for b in shas], 2000
    )
    for left, right in pairs:
        left_reach, right_reach = walk(repo, left), walk(repo, right)
        assert repo.ancestors(left) == left_reach
        assert repo.is_ancestor(right, left) == (right in left_reach)
        common = left_reach & right_reach
        expected = max(common, key=lambda sha: repo.commits[sha].serial) if common else None
        assert repo.merge_base(left, right) == expected
        assert [c.id for c in repo.log(left, exclude=right)] == sorted(
            left_reach - right_reach, key=lambda sha: repo.commits[sha].serial, reverse=True
        )
    assert repo.is_ancestor("f" * 40, shas[0]) is False


def test_a_commits_digest_follows_from_its_parent_and_equals_the_whole_trees():
    repo = random_history(4, 200)
    for sha, commit in repo.commits.items():
        assert repo._digests[sha] == tree_digest(commit.tree)
    same = dict(next(iter(repo.commits.values())).tree)
    assert tree_digest(same) == tree_digest(dict(reversed(same.items())))


def _status(api, project_id, iid=1):
    body = api.get(f"/projects/{project_id}/merge_requests/{iid}").json()
    return body["merge_status"], body["detailed_merge_status"], body["has_conflicts"]


def test_a_moved_target_branch_is_checked_again(sim, project_id, api):
    sim.push(project_id, BRANCH, {"README.md": "# widgets, by the bot\n"}, start_branch="main")
    sim.create_merge_request(project_id, BRANCH, "Reword the README", user="workqueue-bot")
    assert _status(api, project_id) == ("can_be_merged", "mergeable", False)
    assert _status(api, project_id) == ("can_be_merged", "mergeable", False)  # remembered

    # Someone lands a different README on main: the same MR head now conflicts.
    main = sim.push(project_id, "main", {"README.md": "# widgets, by a human\n"})
    assert _status(api, project_id) == ("cannot_be_merged", "conflict", True)
    body = api.get(f"/projects/{project_id}/merge_requests/1").json()
    assert body["diff_refs"]["start_sha"] == main
    with pytest.raises(ValueError, match=r"conflicts on README\.md"):
        sim.merge(project_id, 1)

    # A change elsewhere on main moves the target again; still the same conflict.
    sim.push(project_id, "main", {"docs/new.md": "new\n"})
    assert _status(api, project_id)[:2] == ("cannot_be_merged", "conflict")

    # The bot rebuilds its branch on the new main: a new source head, mergeable again.
    sim.force_push(
        project_id,
        BRANCH,
        {**sim.files(project_id, "main"), "README.md": "# widgets, by both\n"},
        onto=sim.branch_head(project_id, "main"),
    )
    assert _status(api, project_id) == ("can_be_merged", "mergeable", False)
    body = api.get(f"/projects/{project_id}/merge_requests/1/changes").json()
    assert body["diff_refs"]["base_sha"] == sim.branch_head(project_id, "main")
    readme = next(c for c in body["changes"] if c["new_path"] == "README.md")
    assert "+# widgets, by both" in readme["diff"]
    sim.merge(project_id, 1)
    assert sim.read_file(project_id, "main", "README.md") == b"# widgets, by both\n"


def test_answers_stay_right_when_the_memo_overflows(sim, project_id, api, monkeypatch):
    monkeypatch.setattr(repository, "MEMO_LIMIT", 4)
    for index in range(6):
        branch = f"bot/file-{index}"
        sim.push(project_id, branch, {f"f{index}.txt": "x\n"}, start_branch="main")
        sim.create_merge_request(project_id, branch, f"Add f{index}", user="workqueue-bot")
    for _ in range(3):
        for iid in range(1, 7):
            assert _status(api, project_id, iid) == ("can_be_merged", "mergeable", False)
    assert len(sim.state.find_project(project_id).repository._memo) <= 4


def test_merge_request_heads_follow_pushes_and_merges(sim, project_id):
    first = sim.push(project_id, "bot/a", {"a.txt": "a\n"}, start_branch="main")
    sim.create_merge_request(project_id, "bot/a", "A")
    sim.push(project_id, "bot/b", {"b.txt": "b\n"}, start_branch="main")
    sim.create_merge_request(project_id, "bot/b", "B")
    heads = sim.merge_request_heads(project_id)
    assert [tuple(h) for h in heads][:1] == [(1, first, "bot/a")]

    moved = sim.push(project_id, "bot/a", {"a.txt": "a2\n"})
    sim.merge(project_id, 2)
    assert [tuple(h) for h in sim.merge_request_heads(project_id)] == [(1, moved, "bot/a")]
    assert [h.iid for h in sim.merge_request_heads(project_id, state=None)] == [1, 2]
    assert [h.iid for h in sim.merge_request_heads(project_id, state="merged")] == [2]
