"""Projects, branches, the Commits API, compare and files — driven through python-gitlab."""

from __future__ import annotations

import base64

import gitlab
import pytest


def test_project_lookup_by_encoded_path_and_by_id(sim, gl, project_id, project_path):
    by_path = gl.projects.get(project_path)
    by_id = gl.projects.get(project_id)

    assert by_path.id == by_id.id == project_id
    assert by_path.path_with_namespace == project_path
    assert by_path.default_branch == "main"
    # python-gitlab sent the path as one %2F-encoded segment, and the router kept it whole.
    assert sim.log.records()[0].path == "/projects/acme%2Fplatform%2Fwidgets"


def test_unknown_project_is_404_with_gitlab_message(gl, project_id):
    with pytest.raises(gitlab.GitlabGetError) as caught:
        gl.projects.get("acme/nope")
    assert caught.value.response_code == 404
    assert caught.value.error_message == "404 Project Not Found"


def test_branches_get_create_delete(project):
    created = project.branches.create({"branch": "feature/a", "ref": "main"})
    assert created.name == "feature/a"
    assert (
        project.branches.get("feature/a").commit["id"] == project.branches.get("main").commit["id"]
    )

    with pytest.raises(gitlab.GitlabCreateError) as exists:
        project.branches.create({"branch": "feature/a", "ref": "main"})
    assert (exists.value.response_code, exists.value.error_message) == (
        400,
        "Branch already exists",
    )

    with pytest.raises(gitlab.GitlabCreateError) as bad_ref:
        project.branches.create({"branch": "feature/b", "ref": "nowhere"})
    assert bad_ref.value.error_message == "Invalid reference name: nowhere"

    project.branches.delete("feature/a")
    with pytest.raises(gitlab.GitlabGetError) as gone:
        project.branches.get("feature/a")
    assert (gone.value.response_code, gone.value.error_message) == (404, "404 Branch Not Found")

    with pytest.raises(gitlab.GitlabDeleteError) as default:
        project.branches.delete("main")
    assert default.value.response_code == 405


def test_commit_with_start_branch_creates_the_branch_from_the_target(sim, project_id, project):
    main_head = sim.branch_head(project_id, "main")
    commit = project.commits.create(
        {
            "branch": "bot/change",
            "start_branch": "main",
            "commit_message": "Change things\n\nLonger body.",
            "actions": [
                {"action": "update", "file_path": "README.md", "content": "# widgets v2\n"},
                {
                    "action": "create",
                    "file_path": "docs/new.md",
                    "content": "bmV3Cg==",
                    "encoding": "base64",
                },
                {"action": "delete", "file_path": "src/app.py"},
                {
                    "action": "move",
                    "file_path": "tools/build.sh",
                    "previous_path": "scripts/build.sh",
                },
                {"action": "chmod", "file_path": "tools/build.sh", "execute_filemode": False},
            ],
        }
    )

    assert commit.parent_ids == [main_head]
    assert commit.title == "Change things"
    assert sim.branch_head(project_id, "bot/change") == commit.id
    assert sim.branch_head(project_id, "main") == main_head
    files = sim.files(project_id, "bot/change")
    assert files["README.md"] == b"# widgets v2\n"
    assert files["docs/new.md"] == b"new\n"
    assert "src/app.py" not in files
    assert "scripts/build.sh" not in files
    assert files["tools/build.sh"] == b"#!/bin/sh\necho build\n"
    raw = project.files.get(file_path="tools/build.sh", ref="bot/change")
    assert raw.execute_filemode is False
    assert base64.b64decode(raw.content) == b"#!/bin/sh\necho build\n"


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (
            {"action": "create", "file_path": "README.md", "content": "x"},
            "A file with this name already exists",
        ),
        (
            {"action": "update", "file_path": "missing.txt", "content": "x"},
            "A file with this name doesn't exist",
        ),
        ({"action": "delete", "file_path": "missing.txt"}, "A file with this name doesn't exist"),
        (
            {"action": "create", "file_path": "src", "content": "x"},
            "A directory with this name already exists",
        ),
        (
            {"action": "create", "file_path": "a/../b", "content": "x"},
            "Path cannot include directory traversal",
        ),
        (
            {"action": "update", "file_path": "README.md"},
            "400 Bad request - actions[0][content] is required for update action",
        ),
        (
            {"action": "rename", "file_path": "README.md"},
            (
                "400 Bad request - actions[0][action] must be one of: "
                "create, update, move, delete, chmod"
            ),
        ),
        (
            {"action": "create", "file_path": "x", "encoding": "hex"},
            "400 Bad request - actions[0][encoding] must be text or base64",
        ),
        (
            {"action": "chmod", "file_path": "README.md"},
            "400 Bad request - actions[0][execute_filemode] is required for chmod action",
        ),
    ],
)
def test_commit_refusals_carry_gitlabs_messages(sim, project_id, project, action, message):
    before = sim.branches(project_id)
    with pytest.raises(gitlab.GitlabCreateError) as caught:
        project.commits.create(
            {"branch": "bot/x", "start_branch": "main", "commit_message": "m", "actions": [action]}
        )
    assert caught.value.response_code == 400
    assert caught.value.error_message == message
    assert sim.branches(project_id) == before  # nothing was written


def test_existing_branch_needs_force_and_force_rebuilds_it_from_the_start_branch(
    sim, project_id, project, bot_branch
):
    update = {"action": "update", "file_path": "README.md", "content": "second\n"}
    payload = {
        "branch": "bot/bump-requests",
        "start_branch": "main",
        "commit_message": "again",
        "actions": [update],
    }
    with pytest.raises(gitlab.GitlabCreateError) as caught:
        project.commits.create(payload)
    assert caught.value.error_message == (
        "A branch called 'bot/bump-requests' already exists. "
        "Switch to that branch in order to make changes"
    )

    forced = project.commits.create({**payload, "force": True})

    # One commit on top of main: the earlier bump is gone from the branch.
    assert forced.parent_ids == [sim.branch_head(project_id, "main")]
    files = sim.files(project_id, "bot/bump-requests")
    assert files["README.md"] == b"second\n"
    assert files["requirements.txt"] == sim.files(project_id, "main")["requirements.txt"]


def test_commit_on_missing_start_branch_and_stale_last_commit_id(project, sim, project_id):
    with pytest.raises(gitlab.GitlabCreateError) as missing:
        project.commits.create(
            {
                "branch": "x",
                "start_branch": "nope",
                "commit_message": "m",
                "actions": [{"action": "create", "file_path": "f", "content": ""}],
            }
        )
    assert (
        missing.value.error_message == "You can only create or edit files when you are on a branch"
    )

    with pytest.raises(gitlab.GitlabCreateError) as stale:
        project.commits.create(
            {
                "branch": "main",
                "commit_message": "m",
                "actions": [
                    {
                        "action": "update",
                        "file_path": "README.md",
                        "content": "x",
                        "last_commit_id": "0" * 40,
                    }
                ],
            }
        )
    assert (
        stale.value.error_message == "The file has changed since you started editing it: README.md"
    )


def test_protected_branch_refuses_pushes(sim, project_id, project):
    sim.configure_project(project_id, protected_branches=["main"])
    with pytest.raises(gitlab.GitlabCreateError) as caught:
        project.commits.create(
            {
                "branch": "main",
                "commit_message": "m",
                "actions": [{"action": "update", "file_path": "README.md", "content": "x"}],
            }
        )
    assert caught.value.response_code == 403
    assert (
        caught.value.error_message == "403 Forbidden - You are not allowed to push into this branch"
    )


def test_compare_computes_real_diffs_from_the_merge_base(sim, project_id, project, bot_branch):
    # main moves on after the branch was cut: compare must not show main's change.
    sim.push(project_id, "main", {"README.md": "# widgets (main moved)\n"})

    result = project.repository_compare("main", "bot/bump-requests")

    assert [c["id"] for c in result["commits"]] == [bot_branch["id"]]
    assert result["commit"]["id"] == bot_branch["id"]
    assert result["compare_same_ref"] is False
    [diff] = result["diffs"]
    assert diff["new_path"] == diff["old_path"] == "requirements.txt"
    assert (diff["new_file"], diff["deleted_file"], diff["renamed_file"]) == (False, False, False)
    assert diff["a_mode"] == diff["b_mode"] == "100644"
    assert diff["diff"] == (
        "@@ -1,3 +1,3 @@\n-requests==2.31.0\n+requests==2.32.3\n flask==3.0.0\n rich==13.7.0\n"
    )

    straight = project.repository_compare("main", "bot/bump-requests", straight=True)
    assert {d["new_path"] for d in straight["diffs"]} == {"README.md", "requirements.txt"}


def test_compare_of_identical_content_has_no_diffs(project):
    project.commits.create(
        {
            "branch": "bot/noop",
            "start_branch": "main",
            "commit_message": "same",
            "actions": [{"action": "update", "file_path": "README.md", "content": "# widgets\n"}],
        }
    )
    result = project.repository_compare("main", "bot/noop")
    assert result["diffs"] == []
    assert len(result["commits"]) == 1

    same = project.repository_compare("main", "main")
    assert same["compare_same_ref"] is True
    assert (same["commits"], same["diffs"], same["commit"]) == ([], [], None)

    with pytest.raises(gitlab.GitlabGetError) as caught:
        project.repository_compare("main", "nope")
    assert caught.value.error_message == "404 Ref Not Found"


def test_exact_move_is_reported_as_a_rename(project):
    project.commits.create(
        {
            "branch": "bot/mv",
            "start_branch": "main",
            "commit_message": "mv",
            "actions": [
                {"action": "move", "file_path": "src/main.py", "previous_path": "src/app.py"}
            ],
        }
    )
    [diff] = project.repository_compare("main", "bot/mv")["diffs"]
    assert (diff["old_path"], diff["new_path"], diff["renamed_file"]) == (
        "src/app.py",
        "src/main.py",
        True,
    )
    assert diff["diff"] == ""


def test_files_api_and_raw(project):
    file = project.files.get(file_path="src/app.py", ref="main")
    assert file.decode() == b"print('hello')\n"
    assert file.last_commit_id == project.branches.get("main").commit["id"]
    assert project.files.raw(file_path="src/app.py", ref="main") == b"print('hello')\n"
    with pytest.raises(gitlab.GitlabGetError) as caught:
        project.files.get(file_path="nope.txt", ref="main")
    assert caught.value.error_message == "404 File Not Found"


def test_commit_into_empty_project_creates_the_first_commit(sim, gl):
    sim.create_project("acme/empty")
    empty = gl.projects.get("acme/empty")
    assert empty.empty_repo is True
    assert empty.default_branch == "main"
    commit = empty.commits.create(
        {
            "branch": "main",
            "commit_message": "init",
            "actions": [{"action": "create", "file_path": "a.txt", "content": "a"}],
        }
    )
    assert commit.parent_ids == []
    assert gl.projects.get("acme/empty").empty_repo is False
