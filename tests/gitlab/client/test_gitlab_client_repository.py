"""Projects, branches, commits and compare through `GitLabClient` against the simulator."""

from __future__ import annotations

import threading

import pytest
from gitlab_client_support import FILES, PROJECT

from workqueue.gitlab import (
    BranchInfo,
    CommitInfo,
    CompareInfo,
    PermanentGitLabError,
    ProjectInfo,
)

PROJECT_ROUTE = "/projects/:id"
COMMITS = "/projects/:id/repository/commits"


def bump(content="requests==2.32.3\nflask==3.0.0\n"):
    return [{"action": "update", "file_path": "requirements.txt", "content": content}]


def test_project_is_fetched_once_and_cached(sim, client, project_id, calls):
    info = client.project(PROJECT)
    assert info == ProjectInfo(
        id=project_id,
        path_with_namespace=PROJECT,
        default_branch="main",
        web_url=f"{sim.url}/{PROJECT}",
        merge_method="merge",
    )
    assert client.project(PROJECT) is info
    assert sim.request_count("GET", PROJECT_ROUTE) == 1
    assert calls.calls == [("projects.get", 200)]
    # The cache is per key: the numeric id is another lookup, then cached too.
    assert client.project(project_id) == info
    assert client.project(project_id) == info
    assert sim.request_count("GET", PROJECT_ROUTE) == 2


@pytest.mark.parametrize(
    ("setting", "read"),
    [(None, None), ("", ""), ("ci/build.yml@group/ci", "ci/build.yml@group/ci")],
)
def test_project_shows_its_ci_config_path_as_gitlab_does(
    sim, make_client, project_id, setting, read
):
    """GitLab answers `null` while the setting was never set and `""` once it is cleared."""
    if setting is not None:
        sim.configure_project(project_id, ci_config_path=setting)
    assert make_client().project(PROJECT).ci_config_path == read


def test_project_cache_is_thread_safe(sim, client):
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(client.project(PROJECT))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8
    assert all(result is results[0] for result in results)
    client.project(PROJECT)
    assert 1 <= sim.request_count("GET", PROJECT_ROUTE) <= 8


def test_paths_with_subgroups_and_slashed_branches_are_percent_encoded(sim, client, project_id):
    sim.create_branch(project_id, "bot/deep/name")
    branch = client.branch(PROJECT, "bot/deep/name")
    main_head = sim.branch_head(project_id, "main")
    assert isinstance(branch, BranchInfo)
    assert (branch.name, branch.sha, branch.protected, branch.default) == (
        "bot/deep/name",
        main_head,
        False,
        False,
    )
    assert branch.commit.sha == main_head
    [record] = sim.log.records("GET", "/projects/:id/repository/branches/:branch")
    assert (
        record.path == "/projects/acme%2Fplatform%2Fwidgets/repository/branches/bot%2Fdeep%2Fname"
    )


def test_branch_missing_is_none_but_a_missing_project_raises(client):
    assert client.branch(PROJECT, "nope") is None
    with pytest.raises(PermanentGitLabError) as caught:
        client.branch("acme/missing", "main")
    assert (caught.value.status, caught.value.message) == (404, "404 Project Not Found")


def test_branch_head_commit_says_who_made_it(sim, client, project_id):
    sim.push(project_id, "feature", {"a.txt": "a\n"}, message="Human work\n\nBody\n")
    branch = client.branch(PROJECT, "feature")
    assert branch is not None
    assert branch.commit.message == "Human work\n\nBody\n"
    assert branch.commit.title == "Human work"
    assert branch.commit.author_email == branch.commit.committer_email == sim.human.email
    made = client.commit(
        PROJECT, branch="mine", start_branch="main", message="Ours", actions=bump()
    )
    ours = client.branch(PROJECT, "mine")
    assert ours is not None
    assert ours.commit == made
    assert made.author_email == made.committer_email == sim.bot.email


def test_default_branch_flag(client):
    main = client.branch(PROJECT, "main")
    assert main is not None
    assert main.default


def test_delete_branch(sim, client, project_id, calls):
    sim.create_branch(project_id, "bot/x")
    assert client.delete_branch(PROJECT, "bot/x") is True
    assert sim.branch_head(project_id, "bot/x") is None
    assert client.delete_branch(PROJECT, "bot/x") is False
    assert calls.calls == [("branches.delete", 204), ("branches.delete", 404)]
    with pytest.raises(PermanentGitLabError) as caught:
        client.delete_branch(PROJECT, "main")
    assert caught.value.status == 405


def test_commit_with_start_branch_creates_the_branch(sim, client, project_id, calls):
    main_head = sim.branch_head(project_id, "main")
    commit = client.commit(
        PROJECT,
        branch="bot/bump",
        start_branch="main",
        message="Bump requests\n\nBody",
        actions=bump(),
    )
    assert isinstance(commit, CommitInfo)
    assert commit.sha == sim.branch_head(project_id, "bot/bump")
    assert commit.parent_ids == (main_head,)
    assert commit.title == "Bump requests"
    assert commit.web_url.endswith(f"/-/commit/{commit.sha}")
    assert (
        sim.read_file(project_id, "bot/bump", "requirements.txt")
        == b"requests==2.32.3\nflask==3.0.0\n"
    )
    assert calls.calls == [("commits.create", 201)]


def test_force_replaces_the_branch_with_exactly_the_new_tree(sim, client, project_id):
    client.commit(
        PROJECT,
        branch="bot/bump",
        start_branch="main",
        message="first",
        actions=[
            *bump(),
            {"action": "create", "file_path": "docs/old.md", "content": "old\n"},
        ],
    )
    # The target moves on meanwhile.
    main_head = sim.push(project_id, "main", {"CHANGELOG.md": "v2\n"})

    # Without force an existing branch is refused (GitLab's message, permanent).
    with pytest.raises(PermanentGitLabError) as caught:
        client.commit(
            PROJECT, branch="bot/bump", start_branch="main", message="second", actions=bump("x\n")
        )
    assert caught.value.status == 400
    assert caught.value.message == (
        "A branch called 'bot/bump' already exists. Switch to that branch in order to make changes"
    )

    second = client.commit(
        PROJECT,
        branch="bot/bump",
        start_branch="main",
        message="second",
        actions=[
            {"action": "update", "file_path": "requirements.txt", "content": "x\n"},
            {"action": "create", "file_path": "bin/run", "content": "#!/bin/sh\n"},
            {"action": "chmod", "file_path": "src/app.py", "execute_filemode": True},
        ],
        force=True,
    )
    assert second.parent_ids == (main_head,)
    expected = {
        **{path: content.encode() for path, content in FILES.items()},
        "CHANGELOG.md": b"v2\n",
        "requirements.txt": b"x\n",
        "bin/run": b"#!/bin/sh\n",
    }
    assert sim.files(project_id, "bot/bump") == expected  # docs/old.md is gone
    assert [c.id for c in sim.log_commits(project_id, "bot/bump", exclude="main")] == [second.sha]


def test_base64_move_and_delete_actions(sim, client, project_id):
    client.commit(
        PROJECT,
        branch="bot/b64",
        start_branch="main",
        message="m",
        actions=[
            {
                "action": "create",
                "file_path": "blob.bin",
                "content": "AAEC/w==",
                "encoding": "base64",
            },
            {"action": "move", "file_path": "docs/README.md", "previous_path": "README.md"},
            {"action": "delete", "file_path": "src/app.py"},
        ],
    )
    files = sim.files(project_id, "bot/b64")
    assert files["blob.bin"] == b"\x00\x01\x02\xff"
    assert files["docs/README.md"] == b"# widgets\n"
    assert "README.md" not in files
    assert "src/app.py" not in files


def test_commit_refusals_carry_gitlabs_message(sim, client, project_id):
    with pytest.raises(PermanentGitLabError) as caught:
        client.commit(
            PROJECT,
            branch="bot/x",
            start_branch="main",
            message="m",
            actions=[{"action": "create", "file_path": "README.md", "content": "again\n"}],
        )
    assert (caught.value.status, caught.value.message) == (
        400,
        "A file with this name already exists",
    )
    assert caught.value.operation == "commits.create"
    assert "A file with this name already exists" in str(caught.value)

    with pytest.raises(PermanentGitLabError) as caught:
        client.commit(
            PROJECT,
            branch="bot/x",
            start_branch="main",
            message="m",
            actions=[{"action": "update", "file_path": "missing.txt", "content": "x"}],
        )
    assert caught.value.message == "A file with this name doesn't exist"
    assert sim.branch_head(project_id, "bot/x") is None
    assert sim.request_count("POST", COMMITS) == 2  # one request each, no retries


def test_commit_to_a_protected_branch_is_403(sim, client, project_id):
    sim.configure_project(project_id, protected_branches=["release"])
    sim.create_branch(project_id, "release")
    with pytest.raises(PermanentGitLabError) as caught:
        client.commit(PROJECT, branch="release", message="m", actions=bump())
    assert caught.value.status == 403
    assert caught.value.message == "403 Forbidden - You are not allowed to push into this branch"


def test_compare_reports_what_the_source_adds(sim, client, project_id, calls):
    commit = client.commit(
        PROJECT, branch="bot/x", start_branch="main", message="m", actions=bump()
    )
    diff = client.compare(PROJECT, "main", "bot/x")
    assert diff == CompareInfo(
        diffs_count=1,
        commit_shas=(commit.sha,),
        changed_paths=("requirements.txt",),
        same_ref=False,
        timed_out=False,
    )
    assert diff.differs
    assert calls.calls[-1] == ("repository.compare", 200)

    same = client.compare(PROJECT, "main", "main")
    assert same.same_ref
    assert not same.differs


def test_compare_is_empty_when_the_commit_changes_nothing(sim, client, project_id):
    # Content identical to the target: a commit exists but the MR would be empty (DDR-43).
    client.commit(
        PROJECT,
        branch="bot/same",
        start_branch="main",
        message="m",
        actions=bump(FILES["requirements.txt"]),
    )
    diff = client.compare(PROJECT, "main", "bot/same")
    assert diff.diffs_count == 0
    assert len(diff.commit_shas) == 1
    assert not diff.differs


def test_compare_semantics_merge_base_versus_straight(sim, client, project_id):
    client.commit(PROJECT, branch="bot/x", start_branch="main", message="m", actions=bump())
    sim.push(project_id, "main", {"CHANGELOG.md": "v2\n"})  # target moves on

    mr_diff = client.compare(PROJECT, "main", "bot/x")  # from the merge base: the MR's diff
    assert mr_diff.changed_paths == ("requirements.txt",)
    straight = client.compare(PROJECT, "main", "bot/x", straight=True)  # tree against tree
    assert set(straight.changed_paths) == {"requirements.txt", "CHANGELOG.md"}
    [record, straight_record] = sim.log.records("GET", "/projects/:id/repository/compare")
    assert record.query["straight"] == "False"
    assert straight_record.query["straight"] == "True"


def test_compare_unknown_ref_is_404(client):
    with pytest.raises(PermanentGitLabError) as caught:
        client.compare(PROJECT, "main", "nope")
    assert (caught.value.status, caught.value.message) == (404, "404 Ref Not Found")
