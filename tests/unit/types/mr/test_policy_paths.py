"""Path, blocklist-glob, branch-name and project rules of the `mr` policy."""

from __future__ import annotations

import re
import subprocess

import pytest

from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.paths import (
    branch_problem,
    check_glob,
    glob_to_regex,
    matching_glob,
    path_problem,
    project_problem,
)
from workqueue.types.mr.validation.policy import check_file_actions, check_submission

DEFAULT = MRTypeConfig()


def _submission(actions: list[dict[str, object]], **overrides: object) -> MRWorkItemCreate:
    body: dict[str, object] = {
        "project": "group/project",
        "source_branch": "workqueue/sync",
        "target_branch": "main",
        "title": "Sync",
        "commit_message": "Sync sources",
        "file_actions": actions,
    }
    body.update(overrides)
    return MRWorkItemCreate.model_validate(body)


def _violations(actions: list[dict[str, object]], config: MRTypeConfig = DEFAULT) -> list[tuple]:
    parsed = _submission(actions).file_actions
    return [(v.loc, v.kind) for v in check_file_actions(parsed, config)]


# --- canonical paths ---------------------------------------------------------

ACCEPTED_PATHS = [
    "README.md",
    "a/b/c.txt",
    ".gitignore",
    ".gitattributes",
    ".gitmodules",
    "a/.gitkeep",
    ".github/workflows/ci.yml",
    ".git.old",
    ".gitx",
    "x/.git-hooks/pre-commit",
    "git~2",
    "git",
    "..foo",
    "foo..bar",
    "...",
    "a/.../b",
    ".hidden/file",
    "-leading-dash",
    "with space/and more.txt",
    " leading-space",
    "naïve/café.txt",
    "日本語/ファイル.md",
    "emoji-😀.txt",
    "Ωmega/ΣΙΓΜΑ",
    "non\u00a0breaking",
    "C:/not-absolute-on-linux",
    "a~b^c:d?e*f[g]h",
    "@{weird}/but/fine",
]


@pytest.mark.parametrize("path", ACCEPTED_PATHS)
def test_canonical_paths_are_accepted(path):
    assert path_problem(path) is None


REJECTED_PATHS = [
    # (path, kind, fragment of the message)
    ("", "path_not_canonical", "empty"),
    ("/abs", "path_not_canonical", "absolute"),
    ("/", "path_not_canonical", "absolute"),
    ("/a/../b", "path_not_canonical", "absolute"),
    ("a/", "path_not_canonical", "trailing"),
    ("a/b/", "path_not_canonical", "trailing"),
    ("a//b", "path_not_canonical", "empty segments"),
    ("a///b", "path_not_canonical", "empty segments"),
    ("a\\b", "path_not_canonical", "backslash"),
    ("\\abs", "path_not_canonical", "backslash"),
    ("a\\..\\b", "path_not_canonical", "backslash"),
    (".", "path_not_canonical", "'.' segments"),
    ("./a", "path_not_canonical", "'.' segments"),
    ("a/./b", "path_not_canonical", "'.' segments"),
    ("a/.", "path_not_canonical", "'.' segments"),
    ("..", "path_not_canonical", "'..' segments"),
    ("../a", "path_not_canonical", "'..' segments"),
    ("a/../b", "path_not_canonical", "'..' segments"),
    ("a/..", "path_not_canonical", "'..' segments"),
    (".git", "path_git_component", ".git"),
    (".git/config", "path_git_component", ".git"),
    ("a/.git/b", "path_git_component", ".git"),
    ("a/.git", "path_git_component", ".git"),
    (".GIT", "path_git_component", ".git"),
    (".Git/hooks/pre-commit", "path_git_component", ".git"),
    ("sub/.gIt/HEAD", "path_git_component", ".git"),
    # Names that Windows resolves to `.git`: trailing dots/spaces, 8.3 short
    # name, alternate data stream.
    (".git.", "path_git_component", ".git"),
    (".git ", "path_git_component", ".git"),
    (".git. .", "path_git_component", ".git"),
    ("git~1/config", "path_git_component", ".git"),
    ("GIT~1", "path_git_component", ".git"),
    (".git::$INDEX_ALLOCATION/config", "path_git_component", ".git"),
    ("a\x00b", "path_invalid_character", "U+0000"),
    ("a\x01b", "path_invalid_character", "U+0001"),
    ("a\tb", "path_invalid_character", "U+0009"),
    ("a\nb", "path_invalid_character", "U+000A"),
    ("a\rb", "path_invalid_character", "U+000D"),
    ("a\x1bb", "path_invalid_character", "U+001B"),
    ("a\x1fb", "path_invalid_character", "U+001F"),
    ("a\x7fb", "path_invalid_character", "U+007F"),
    ("a\x85b", "path_invalid_character", "U+0085"),
    ("a\x9fb", "path_invalid_character", "U+009F"),
    ("evil\u202etxt.exe", "path_invalid_character", "U+202E"),
    ("a\u200bb", "path_invalid_character", "U+200B"),
    (".g\u200cit/config", "path_invalid_character", "U+200C"),
    ("\ufeffREADME", "path_invalid_character", "U+FEFF"),
    ("a\u2028b", "path_invalid_character", "U+2028"),
    ("a\u2029b", "path_invalid_character", "U+2029"),
    ("a\ud800b", "path_invalid_character", "U+D800"),
    ("a/\udfff", "path_invalid_character", "U+DFFF"),
]


@pytest.mark.parametrize(("path", "kind", "fragment"), REJECTED_PATHS)
def test_non_canonical_paths_are_rejected(path, kind, fragment):
    problem = path_problem(path)
    assert problem is not None
    assert problem.kind == kind
    assert fragment in problem.message


@pytest.mark.parametrize(("path", "kind", "fragment"), REJECTED_PATHS)
def test_every_path_rule_applies_to_file_path_and_previous_path(path, kind, fragment):
    actions = [
        {"action": "update", "file_path": "ok.txt", "content": "x"},
        {"action": "delete", "file_path": path},
        {"action": "move", "file_path": "new.txt", "previous_path": path},
    ]
    assert _violations(actions) == [
        (("body", "file_actions", 1, "file_path"), kind),
        (("body", "file_actions", 2, "previous_path"), kind),
        # The same bad path twice is also a duplicate.
        (("body", "file_actions", 2, "previous_path"), "duplicate_path"),
    ]


def test_path_length_is_limited_in_utf8_bytes():
    config = MRTypeConfig(max_path_bytes=10)
    at_limit = "é" * 5  # 10 bytes, 5 characters
    over = "é" * 4 + "ab/c"  # 12 bytes
    assert _violations([{"action": "delete", "file_path": at_limit}], config) == []
    assert _violations([{"action": "delete", "file_path": over}], config) == [
        (("body", "file_actions", 0, "file_path"), "too_long")
    ]


# --- blocklist globs ---------------------------------------------------------

GLOB_TABLE = [
    # Each entry: pattern, path, whether the pattern matches the path.
    (".gitlab-ci.yml", ".gitlab-ci.yml", True),
    (".gitlab-ci.yml", ".GITLAB-CI.yml", True),
    (".gitlab-ci.yml", ".Gitlab-Ci.YML", True),
    (".gitlab-ci.yml", "sub/.gitlab-ci.yml", False),
    (".gitlab-ci.yml", ".gitlab-ci.yml.bak", False),
    (".gitlab-ci.yml", "x.gitlab-ci.yml", False),
    (".gitlab-ci.yml", ".gitlab-ciXyml", False),
    (".gitlab/**", ".gitlab/CODEOWNERS", True),
    (".gitlab/**", ".gitlab/issue_templates/bug.md", True),
    (".gitlab/**", ".GITLAB/x", True),
    (".gitlab/**", ".gitlab", False),
    (".gitlab/**", ".gitlabx/y", False),
    (".gitlab/**", "a/.gitlab/x", False),
    ("CODEOWNERS", "CODEOWNERS", True),
    ("CODEOWNERS", "codeowners", True),
    ("CODEOWNERS", "docs/CODEOWNERS", False),
    ("*.yml", "a.yml", True),
    ("*.yml", ".yml", True),
    ("*.yml", "dir/a.yml", False),
    ("*", "anything", True),
    ("*", "a/b", False),
    ("**", "a/b/c", True),
    ("**/*.yml", "a.yml", True),
    ("**/*.yml", "d/a.yml", True),
    ("**/*.yml", "d/e/a.yml", True),
    ("**/*.yml", "d/e/a.yaml", False),
    ("**/CODEOWNERS", "CODEOWNERS", True),
    ("**/CODEOWNERS", "x/y/CODEOWNERS", True),
    ("**/CODEOWNERS", "xCODEOWNERS", False),
    ("docs/**/secret", "docs/secret", True),
    ("docs/**/secret", "docs/a/b/secret", True),
    ("docs/**/secret", "docs/asecret", False),
    ("a**b", "a/x/y/b", True),
    ("a**b", "ab", True),
    ("?.txt", "a.txt", True),
    ("?.txt", "ab.txt", False),
    ("a?b", "a/b", False),
    ("[ab].txt", "a.txt", True),
    ("[ab].txt", "B.txt", True),
    ("[ab].txt", "c.txt", False),
    ("[!ab].txt", "c.txt", True),
    ("[!ab].txt", "a.txt", False),
    ("[^ab].txt", "c.txt", True),
    ("[a-c]x", "bx", True),
    ("[a-c]x", "dx", False),
    ("x[/]y", "x/y", False),
    ("a[!b]c", "a/c", False),
    ("[]]", "]", True),
    ("[!]]", "a", True),
    ("[!]]", "]", False),
    ("file.txt", "fileXtxt", False),
    ("a+b(c)|d$", "a+b(c)|d$", True),
    ("a+b(c)|d$", "aab(c)|d", False),
    ("naïve/*", "NAÏVE/x", True),
]


@pytest.mark.parametrize(("pattern", "path", "matches"), GLOB_TABLE)
def test_glob_semantics(pattern, path, matches):
    assert (glob_to_regex(pattern).fullmatch(path) is not None) is matches
    assert (matching_glob(path, [pattern]) == pattern) is matches


def test_matching_glob_names_the_first_matching_pattern():
    patterns = ["*.md", "docs/**", "**"]
    assert matching_glob("docs/a.txt", patterns) == "docs/**"
    assert matching_glob("README.md", patterns) == "*.md"
    assert matching_glob("x/y", patterns[:2]) is None


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("", "empty"),
        ("/CODEOWNERS", "must not start with '/'"),
        (".gitlab/", "must not end with '/'"),
        ("[abc", "unclosed"),
        ("a/[!x", "unclosed"),
    ],
)
def test_unusable_globs_are_refused(pattern, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        check_glob(pattern)


DEFAULT_BLOCKED = [
    ".gitlab-ci.yml",
    ".GITLAB-CI.YML",
    ".gitlab/CODEOWNERS",
    ".gitlab/ci/templates/build.yml",
    "CODEOWNERS",
    "docs/CODEOWNERS",
]
DEFAULT_ALLOWED = [
    "README.md",
    "sub/.gitlab-ci.yml",
    "src/CODEOWNERS",
    ".gitlab-ci.yml.orig",
    ".github/CODEOWNERS",
]


@pytest.mark.parametrize("path", DEFAULT_BLOCKED)
def test_default_blocklist_blocks(path):
    assert matching_glob(path, DEFAULT.path_blocklist) is not None


@pytest.mark.parametrize("path", DEFAULT_ALLOWED)
def test_default_blocklist_allows(path):
    assert matching_glob(path, DEFAULT.path_blocklist) is None


BLOCKED_ACTIONS = [
    # (action, field holding the blocked path)
    ({"action": "create", "file_path": ".gitlab-ci.yml", "content": "x"}, "file_path"),
    ({"action": "update", "file_path": ".gitlab/CODEOWNERS", "content": "x"}, "file_path"),
    ({"action": "delete", "file_path": "CODEOWNERS"}, "file_path"),
    ({"action": "chmod", "file_path": ".gitlab/run.sh", "execute_filemode": True}, "file_path"),
    ({"action": "move", "file_path": ".gitlab-ci.yml", "previous_path": "ci.yml"}, "file_path"),
    ({"action": "move", "file_path": "ci.yml", "previous_path": ".gitlab-ci.yml"}, "previous_path"),
    ({"action": "move", "file_path": "x", "previous_path": "docs/CODEOWNERS"}, "previous_path"),
    ({"action": "delete", "file_path": ".Gitlab-CI.yml"}, "file_path"),
]


@pytest.mark.parametrize(("action", "field"), BLOCKED_ACTIONS)
def test_blocklist_applies_to_every_action_kind(action, field):
    actions = [{"action": "delete", "file_path": "fine.txt"}, action]
    submission = _submission(actions)
    violations = check_submission(submission, DEFAULT)
    assert [(v.loc, v.kind) for v in violations] == [
        (("body", "file_actions", 1, field), "path_blocked")
    ]
    assert "path_blocklist" in violations[0].message


def test_move_with_both_paths_blocked_reports_both():
    actions = [{"action": "move", "file_path": ".gitlab/a", "previous_path": "CODEOWNERS"}]
    assert _violations(actions) == [
        (("body", "file_actions", 0, "file_path"), "path_blocked"),
        (("body", "file_actions", 0, "previous_path"), "path_blocked"),
    ]


def test_blocklist_comes_from_config():
    config = MRTypeConfig(path_blocklist=["secrets/**"])
    assert _violations([{"action": "delete", "file_path": ".gitlab-ci.yml"}], config) == []
    assert _violations([{"action": "delete", "file_path": "secrets/key"}], config) == [
        (("body", "file_actions", 0, "file_path"), "path_blocked")
    ]
    assert _violations([{"action": "delete", "file_path": ".gitlab-ci.yml"}]) == [
        (("body", "file_actions", 0, "file_path"), "path_blocked")
    ]


def test_empty_blocklist_still_enforces_canonical_paths():
    config = MRTypeConfig(path_blocklist=[])
    assert _violations([{"action": "delete", "file_path": "a/../.git/config"}], config) == [
        (("body", "file_actions", 0, "file_path"), "path_not_canonical")
    ]


def test_non_canonical_path_is_reported_once_not_also_as_blocked():
    assert _violations([{"action": "delete", "file_path": "./.gitlab-ci.yml"}]) == [
        (("body", "file_actions", 0, "file_path"), "path_not_canonical")
    ]


# --- branch names ------------------------------------------------------------

VALID_BRANCHES = [
    "main",
    "master",
    "bot/sync-kernel",
    "feature/a.b",
    "release-1.0",
    "a/b/c/d",
    "UPPER/Case",
    "x_y",
    "a@b",
    "@x",
    "x@",
    "x{y}",
    "a.b.c",
    "a-",
    "lock",
    "a.lock.x",
    "a.lockx/b",
    "日本/ブランチ",
    "café",
    "#123",
    "a'b\"c",
    "head",
    "HEADS",
]

INVALID_BRANCHES = [
    # (name, fragment of the message)
    ("", "empty"),
    ("-x", "start with '-'"),
    ("-", "start with '-'"),
    ("@", "must not be '@'"),
    ("HEAD", "must not be 'HEAD'"),
    ("a..b", "'..'"),
    ("..", "'..'"),
    ("a/../b", "'..'"),
    ("a@{b", "'@{'"),
    ("@{-1}", "'@{'"),
    ("/a", "start with '/'"),
    ("a/", "end with '/'"),
    ("a//b", "'//'"),
    ("a.", "end with '.'"),
    ("a/b.", "end with '.'"),
    (".a", "start with '.'"),
    ("a/.b", "start with '.'"),
    ("a.lock", "'.lock'"),
    ("a.lock/b", "'.lock'"),
    ("a/b.lock", "'.lock'"),
    ("a b", "' '"),
    ("a~b", "'~'"),
    ("a^b", "'^'"),
    ("a:b", "':'"),
    ("a?b", "'?'"),
    ("a*b", "'*'"),
    ("a[b", "'['"),
    ("a\\b", "'\\\\'"),
    ("a\x00b", "U+0000"),
    ("a\x01b", "U+0001"),
    ("a\tb", "U+0009"),
    ("a\nb", "U+000A"),
    ("a\x1fb", "U+001F"),
    ("a\x7fb", "U+007F"),
    ("a\x85b", "U+0085"),
    ("a\u202eb", "U+202E"),
    ("a\u200bb", "U+200B"),
    ("a\ud800b", "U+D800"),
]


@pytest.mark.parametrize("name", VALID_BRANCHES)
def test_valid_branch_names(name):
    assert branch_problem(name) is None


@pytest.mark.parametrize(("name", "fragment"), INVALID_BRANCHES)
def test_invalid_branch_names(name, fragment):
    problem = branch_problem(name)
    assert problem is not None
    assert fragment in problem


# Where this policy is deliberately stricter than git: `@` alone is HEAD in
# revision syntax, and invisible or non-encodable characters are refused for
# the same spoofing reasons as in paths.
STRICTER_THAN_GIT = {"@", "a\x85b", "a\u202eb", "a\u200bb"}


# git is on every machine that can clone this repository; the comparison
# runs everywhere rather than being skipped.
@pytest.mark.parametrize(
    ("name", "valid"),
    [(name, True) for name in VALID_BRANCHES]
    + [
        (name, False)
        for name, _ in INVALID_BRANCHES
        # argv cannot carry NUL or lone surrogates.
        if "\x00" not in name and "\ud800" not in name and name not in STRICTER_THAN_GIT
    ],
)
def test_branch_table_agrees_with_git(name, valid, tmp_path):
    result = subprocess.run(
        ["git", "check-ref-format", "--branch", name],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    assert (result.returncode == 0) is valid


def test_stricter_than_git_entries_are_all_rejected_here():
    for name in STRICTER_THAN_GIT:
        assert branch_problem(name) is not None


@pytest.mark.parametrize("field", ["source_branch", "target_branch"])
@pytest.mark.parametrize(("name", "fragment"), INVALID_BRANCHES)
def test_branch_rules_apply_to_both_branches(field, name, fragment):
    submission = _submission([{"action": "delete", "file_path": "a"}], **{field: name})
    violations = check_submission(submission, DEFAULT)
    assert [(v.loc, v.kind) for v in violations] == [(("body", field), "invalid_branch")]
    assert fragment in violations[0].message


# --- project references ------------------------------------------------------

VALID_PROJECTS = [
    "1",
    "123",
    "9007199254740993",
    "group/project",
    "group/sub/project",
    "a/b/c/d/e",
    "my-group/my.project",
    "g_1/p-2",
    "Group/Project",
    "group/.dotted",
    "group/_underscore",
    "group/p.gitx",
]

INVALID_PROJECTS = [
    ("", "empty"),
    ("0", "leading zeros"),
    ("0123", "leading zeros"),
    ("+1", "numeric id or a 'namespace/project' path"),
    ("-1", "numeric id or a 'namespace/project' path"),
    ("project", "numeric id or a 'namespace/project' path"),
    ("\uff11\uff12\uff13", "numeric id or a 'namespace/project' path"),
    ("/group/p", "empty segments"),
    ("group/p/", "empty segments"),
    ("group//p", "empty segments"),
    ("group/./p", "'.' segments"),
    ("group/../p", "'..' segments"),
    ("group/p.git", "'.git'"),
    ("group/p.GIT", "'.git'"),
    ("group/p.atom", "'.atom'"),
    ("group/-p", "must not start with '-'"),
    ("group/p q", "only letters"),
    ("group/p%2Fq", "only letters"),
    ("grüpp/p", "only letters"),
    ("group/p\x00", "only letters"),
    ("group\\p/x", "only letters"),
]


@pytest.mark.parametrize("project", VALID_PROJECTS)
def test_valid_projects(project):
    assert project_problem(project) is None


@pytest.mark.parametrize(("project", "fragment"), INVALID_PROJECTS)
def test_invalid_projects(project, fragment):
    problem = project_problem(project)
    assert problem is not None
    assert fragment in problem


@pytest.mark.parametrize(("project", "fragment"), INVALID_PROJECTS)
def test_project_violation_location(project, fragment):
    submission = _submission([{"action": "delete", "file_path": "a"}], project=project)
    assert [(v.loc, v.kind) for v in check_submission(submission, DEFAULT)] == [
        (("body", "project"), "invalid_project")
    ]
