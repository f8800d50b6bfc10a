"""Submission-level rules of the `mr` policy: text fields, labels, limits, content, duplicates."""

from __future__ import annotations

import base64

import pytest

from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.policy import (
    Violation,
    check_file_actions,
    check_submission,
    decode_content,
    decoded_size,
)

DEFAULT = MRTypeConfig()
# The base64 grammar is checked apart from what the bytes are (content_rules: binary).
BINARY_ALLOWED = MRTypeConfig(content={"binary": "allow"})


def _body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "project": "group/project",
        "source_branch": "workqueue/sync",
        "target_branch": "main",
        "title": "Sync kernel sources",
        "description": "From upstream.\n\nDetails follow.",
        "commit_message": "Sync sources from upstream",
        "package": "kernel",
        "change_kind": "sync",
        "labels": ["bot", "sync"],
        "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "x"}],
    }
    body.update(overrides)
    return body


def _check(config: MRTypeConfig = DEFAULT, **overrides: object) -> list[tuple]:
    submission = MRWorkItemCreate.model_validate(_body(**overrides))
    return [(v.loc, v.kind) for v in check_submission(submission, config)]


def _check_actions(actions: list[dict[str, object]], config: MRTypeConfig = DEFAULT) -> list:
    parsed = MRWorkItemCreate.model_validate(_body(file_actions=actions)).file_actions
    return [(v.loc, v.kind) for v in check_file_actions(parsed, config)]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_the_api_md_example_is_accepted():
    actions = [
        {"action": "update", "file_path": "kernel.spec", "content": "...", "encoding": "text"},
        {"action": "create", "file_path": "patches/new.patch", "content": _b64(b"...")},
        {"action": "delete", "file_path": "old.txt"},
        {"action": "move", "file_path": "new/name.txt", "previous_path": "old/name.txt"},
        {"action": "chmod", "file_path": "run.sh", "execute_filemode": True},
    ]
    actions[1]["encoding"] = "base64"
    assert _check(file_actions=actions) == []


def test_minimal_submission_is_accepted():
    body = {
        "project": "42",
        "source_branch": "workqueue/x",
        "title": "t",
        "commit_message": "m",
        "file_actions": [{"action": "delete", "file_path": "a"}],
    }
    assert check_submission(MRWorkItemCreate.model_validate(body), DEFAULT) == []


# --- text fields -------------------------------------------------------------

TEXT_CASES = [
    # (field, value, expected kind or None for accepted)
    ("title", "Sync ünïcödé 😀 sources", None),
    ("title", "", "blank"),
    ("title", "   ", "blank"),
    ("title", "two\nlines", "invalid_character"),
    ("title", "tab\there", "invalid_character"),
    ("title", "esc\x1b[31m", "invalid_character"),
    ("title", "nul\x00", "invalid_character"),
    ("title", "c1\x85", "invalid_character"),
    ("title", "bad\ud800", "invalid_unicode"),
    ("commit_message", "Subject\n\nBody\twith tab\r\n", None),
    ("commit_message", "", "blank"),
    ("commit_message", "\n\n", "blank"),
    ("commit_message", "esc\x1b[31m", "invalid_character"),
    ("commit_message", "nul\x00", "invalid_character"),
    ("commit_message", "vertical\x0btab", "invalid_character"),
    ("commit_message", "bad\udfff", "invalid_unicode"),
    ("description", "", None),
    ("description", "   ", None),
    ("description", None, None),
    ("description", "para\n\npara\twith tab", None),
    ("description", "bell\x07", "invalid_character"),
    ("description", "nul\x00", "invalid_character"),
    ("description", "bad\ud800", "invalid_unicode"),
    ("package", None, None),
    ("package", "kernel-5.x", None),
    ("package", "", "blank"),
    ("package", " ", "blank"),
    ("package", "a\nb", "invalid_character"),
    ("change_kind", None, None),
    ("change_kind", "sync", None),
    ("change_kind", "", "blank"),
    ("change_kind", "a\tb", "invalid_character"),
]


@pytest.mark.parametrize(("field", "value", "kind"), TEXT_CASES)
def test_text_fields(field, value, kind):
    expected = [] if kind is None else [(("body", field), kind)]
    assert _check(**{field: value}) == expected


LENGTH_CASES = [
    # (field, config limit name, character repeated up to and past the limit)
    ("title", "max_title_chars", "é"),
    ("description", "max_description_chars", "é"),
    ("package", "max_label_chars", "é"),
    ("change_kind", "max_label_chars", "é"),
]


@pytest.mark.parametrize(("field", "limit_name", "char"), LENGTH_CASES)
def test_character_limits_at_and_over(field, limit_name, char):
    config = MRTypeConfig(**{limit_name: 10})
    assert _check(config, **{field: char * 10}) == []
    assert _check(config, **{field: char * 11}) == [(("body", field), "too_long")]


def test_default_text_limits():
    assert _check(title="t" * 255) == []
    assert _check(title="t" * 256) == [(("body", "title"), "too_long")]
    assert _check(description="d" * 1_048_576) == []
    assert _check(description="d" * 1_048_577) == [(("body", "description"), "too_long")]
    assert _check(commit_message="m" * 65_536) == []
    assert _check(commit_message="m" * 65_537) == [(("body", "commit_message"), "too_long")]


def test_commit_message_limit_counts_utf8_bytes():
    config = MRTypeConfig(max_commit_message_bytes=10)
    assert _check(config, commit_message="é" * 5) == []  # 10 bytes
    assert _check(config, commit_message="é" * 5 + "x") == [
        (("body", "commit_message"), "too_long")
    ]
    # Five characters, but twenty bytes.
    assert _check(config, commit_message="😀" * 5) == [(("body", "commit_message"), "too_long")]


def test_too_long_message_names_limit_and_size():
    submission = MRWorkItemCreate.model_validate(_body(title="t" * 300))
    (violation,) = check_submission(submission, DEFAULT)
    assert violation.message == "title must be at most 255 characters (got 300)"


# --- labels ------------------------------------------------------------------

LABEL_CASES = [
    (["bot"], []),
    ([], []),
    (["bot", "sync", "priority::high", "ünï"], []),
    (["bot", ""], [(("body", "labels", 1), "blank")]),
    ([" "], [(("body", "labels", 0), "blank")]),
    (["a,b"], [(("body", "labels", 0), "invalid_label")]),
    (
        ["ok", "x\ny", "a,b"],
        [(("body", "labels", 1), "invalid_character"), (("body", "labels", 2), "invalid_label")],
    ),
    (["bad\ud800"], [(("body", "labels", 0), "invalid_unicode")]),
    (["l" * 255], []),
    (["ok", "l" * 256], [(("body", "labels", 1), "too_long")]),
    ([f"l{n}" for n in range(50)], []),
    # Over max_labels (50): one violation for the list, not one per label.
    ([f"l{n}" for n in range(51)], [(("body", "labels"), "too_many_labels")]),
    (["a,b"] * 60, [(("body", "labels"), "too_many_labels")]),
]


@pytest.mark.parametrize(("labels", "expected"), LABEL_CASES)
def test_labels(labels, expected):
    assert _check(labels=labels) == expected


# --- branches ----------------------------------------------------------------


def test_target_branch_may_be_omitted():
    assert _check(target_branch=None) == []


def test_source_branch_must_differ_from_target_branch():
    assert _check(source_branch="workqueue/x", target_branch="workqueue/x") == [
        (("body", "source_branch"), "same_branch")
    ]


def test_branches_differing_only_in_case_are_different():
    no_prefix = MRTypeConfig(source_branch_prefix="")
    assert _check(no_prefix, source_branch="bot/Main", target_branch="bot/main") == []


@pytest.mark.parametrize("field", ["source_branch", "target_branch"])
def test_branch_length_counts_utf8_bytes(field):
    config = MRTypeConfig(max_branch_bytes=10, source_branch_prefix="")
    short = {"source_branch": "s", "target_branch": "t"}
    assert _check(config, **{**short, field: "é" * 5}) == []
    assert _check(config, **{**short, field: "é" * 5 + "x"}) == [(("body", field), "too_long")]


def test_default_branch_limit():
    assert _check(source_branch="workqueue/" + "b" * 245) == []
    assert _check(source_branch="workqueue/" + "b" * 246) == [
        (("body", "source_branch"), "too_long")
    ]


# --- action count ------------------------------------------------------------


def _deletes(count: int) -> list[dict[str, object]]:
    return [{"action": "delete", "file_path": f"f{i}"} for i in range(count)]


def test_at_least_one_action_is_required():
    assert _check(file_actions=[]) == [(("body", "file_actions"), "no_actions")]


def test_action_count_at_and_over_limit():
    config = MRTypeConfig(max_actions=3)
    assert _check_actions(_deletes(3), config) == []
    assert _check_actions(_deletes(4), config) == [(("body", "file_actions"), "too_many_actions")]


def test_default_action_limit():
    assert _check_actions(_deletes(500)) == []
    assert _check_actions(_deletes(501)) == [(("body", "file_actions"), "too_many_actions")]


# --- content: encoding and sizes ---------------------------------------------

VALID_BASE64 = ["", "QQ==", "QUI=", "QUJD", "AAEC/w==", "+/+/"]
INVALID_BASE64 = [
    "QQ",  # missing padding
    "Q",  # impossible length
    "QUJDQ",
    "QQ==\n",  # trailing newline
    "QU\nJD",  # line break
    "QU JD",  # space
    " QUJD",
    "QUJD====",  # excess padding
    "QQ==QQ==",  # data after padding
    "=QUJD",  # leading padding
    "QR==",  # non-canonical: unused bits set
    "QUJ-",  # URL-safe alphabet
    "QUJ_",
    "QUJ*",
    "é===",  # non-ASCII
    "QUJD\x00",
]


@pytest.mark.parametrize("content", VALID_BASE64)
@pytest.mark.parametrize("action", ["create", "update"])
def test_valid_base64_is_accepted(action, content):
    actions = [{"action": action, "file_path": "f", "content": content, "encoding": "base64"}]
    assert _check_actions(actions, BINARY_ALLOWED) == []


@pytest.mark.parametrize("content", INVALID_BASE64)
@pytest.mark.parametrize("action", ["create", "update", "move"])
def test_invalid_base64_is_rejected_at_content(action, content):
    actions = [
        {"action": "delete", "file_path": "other"},
        {
            "action": action,
            "file_path": "f",
            "previous_path": "g",
            "content": content,
            "encoding": "base64",
        },
    ]
    if action != "move":
        del actions[1]["previous_path"]
    assert _check_actions(actions) == [(("body", "file_actions", 1, "content"), "invalid_base64")]


def test_base64_content_may_hold_any_bytes_where_binary_is_allowed():
    data = bytes(range(256))
    actions = [
        {"action": "create", "file_path": "bin", "content": _b64(data), "encoding": "base64"}
    ]
    assert _check_actions(actions, BINARY_ALLOWED) == []
    assert _check_actions(actions) == [(("body", "file_actions", 0, "content"), "binary_content")]


TEXT_CONTENT = [
    ("plain", None),
    ("", None),
    ("ünïcödé 😀\n", None),
    ("tabs\tand\r\nCRLF, form\x0cfeed, escape\x1b[0m, DEL\x7f, C1\x85", None),
    ("nul\x00inside", "invalid_character"),
    ("lone\ud800surrogate", "invalid_unicode"),
]


@pytest.mark.parametrize(("content", "kind"), TEXT_CONTENT)
@pytest.mark.parametrize("action", ["create", "update", "move"])
def test_text_content(action, content, kind):
    act: dict[str, object] = {"action": action, "file_path": "f", "content": content}
    if action == "move":
        act["previous_path"] = "g"
    expected = [] if kind is None else [(("body", "file_actions", 0, "content"), kind)]
    assert _check_actions([act]) == expected


def test_nul_in_text_content_points_to_base64():
    parsed = MRWorkItemCreate.model_validate(
        _body(file_actions=[{"action": "create", "file_path": "f", "content": "a\x00"}])
    )
    (violation,) = check_submission(parsed, DEFAULT)
    assert "base64" in violation.message


SIZE_CONFIG = MRTypeConfig(max_file_bytes=8, max_total_bytes=20)


@pytest.mark.parametrize("action", ["create", "update", "move"])
@pytest.mark.parametrize(
    ("content", "encoding", "over"),
    [
        ("12345678", "text", False),
        ("123456789", "text", True),
        ("éééé", "text", False),  # 8 bytes
        ("éééé1", "text", True),  # 9 bytes, 5 characters
        (_b64(b"a" * 8), "base64", False),  # 12 characters, 8 bytes decoded
        (_b64(b"a" * 9), "base64", True),
    ],
)
def test_file_size_at_and_over_limit(action, content, encoding, over):
    act: dict[str, object] = {
        "action": action,
        "file_path": "f",
        "content": content,
        "encoding": encoding,
    }
    if action == "move":
        act["previous_path"] = "g"
    expected = [(("body", "file_actions", 0, "content"), "too_large")] if over else []
    assert _check_actions([act], SIZE_CONFIG) == expected


def test_file_size_message_names_decoded_size_and_limit():
    parsed = MRWorkItemCreate.model_validate(
        _body(file_actions=[{"action": "create", "file_path": "f", "content": "x" * 9}])
    )
    (violation,) = check_file_actions(parsed.file_actions, SIZE_CONFIG)
    assert violation.message == "content is 9 bytes after decoding; the limit is 8"


def _sized(sizes: list[int]) -> list[dict[str, object]]:
    # Alternate encodings and kinds so every content-carrying kind counts.
    actions: list[dict[str, object]] = []
    for i, size in enumerate(sizes):
        if i % 3 == 0:
            actions.append({"action": "create", "file_path": f"f{i}", "content": "x" * size})
        elif i % 3 == 1:
            actions.append(
                {
                    "action": "update",
                    "file_path": f"f{i}",
                    "content": _b64(b"y" * size),
                    "encoding": "base64",
                }
            )
        else:
            actions.append(
                {
                    "action": "move",
                    "file_path": f"f{i}",
                    "previous_path": f"old{i}",
                    "content": "z" * size,
                }
            )
    return actions


def test_total_size_at_limit_is_accepted():
    assert _check_actions(_sized([8, 8, 4]), SIZE_CONFIG) == []


def test_total_size_one_over_limit_is_rejected():
    assert _check_actions(_sized([8, 8, 5]), SIZE_CONFIG) == [
        (("body", "file_actions"), "too_large")
    ]


def test_actions_without_content_count_nothing():
    actions = [
        *_sized([8, 8, 4]),
        {"action": "delete", "file_path": "d"},
        {"action": "chmod", "file_path": "c", "execute_filemode": False},
        {"action": "move", "file_path": "m", "previous_path": "n"},
    ]
    assert _check_actions(actions, SIZE_CONFIG) == []


def test_oversize_file_also_counts_towards_total():
    assert _check_actions(_sized([9, 8, 4]), SIZE_CONFIG) == [
        (("body", "file_actions", 0, "content"), "too_large"),
        (("body", "file_actions"), "too_large"),
    ]


def test_total_message_names_total_and_limit():
    parsed = MRWorkItemCreate.model_validate(_body(file_actions=_sized([8, 8, 5])))
    (violation,) = check_file_actions(parsed.file_actions, SIZE_CONFIG)
    assert violation.message == "file contents total 21 bytes after decoding; the limit is 20"


@pytest.mark.parametrize(
    ("action", "size"),
    [
        ({"action": "create", "file_path": "f", "content": "héllo"}, 6),
        ({"action": "update", "file_path": "f", "content": _b64(b"\x00\x01\x02")}, 4),
        (
            {"action": "update", "file_path": "f", "content": "AAEC", "encoding": "base64"},
            3,
        ),
        ({"action": "move", "file_path": "f", "previous_path": "g"}, 0),
        ({"action": "move", "file_path": "f", "previous_path": "g", "content": ""}, 0),
        ({"action": "delete", "file_path": "f"}, 0),
        ({"action": "chmod", "file_path": "f", "execute_filemode": True}, 0),
    ],
)
def test_decoded_size(action, size):
    (parsed,) = MRWorkItemCreate.model_validate(_body(file_actions=[action])).file_actions
    assert decoded_size(parsed) == size


def test_decode_content_returns_bytes_or_none():
    actions = MRWorkItemCreate.model_validate(
        _body(
            file_actions=[
                {"action": "create", "file_path": "a", "content": "AAEC", "encoding": "base64"},
                {"action": "create", "file_path": "b", "content": "AAEC"},
                {"action": "delete", "file_path": "c"},
                {"action": "move", "file_path": "d", "previous_path": "e"},
            ]
        )
    ).file_actions
    assert [decode_content(a) for a in actions] == [b"\x00\x01\x02", b"AAEC", None, None]


@pytest.mark.parametrize("content", INVALID_BASE64)
def test_decoded_size_raises_on_invalid_base64(content):
    (parsed,) = MRWorkItemCreate.model_validate(
        _body(
            file_actions=[
                {"action": "create", "file_path": "f", "content": content, "encoding": "base64"}
            ]
        )
    ).file_actions
    with pytest.raises(ValueError, match=r"."):
        decoded_size(parsed)


# --- duplicates and moves ----------------------------------------------------

DUPLICATE_CASES = [
    (
        "same file_path twice",
        [
            {"action": "update", "file_path": "a", "content": "1"},
            {"action": "delete", "file_path": "a"},
        ],
        [(("body", "file_actions", 1, "file_path"), "duplicate_path")],
    ),
    (
        "move target reused",
        [
            {"action": "move", "file_path": "new", "previous_path": "old"},
            {"action": "create", "file_path": "new", "content": ""},
        ],
        [(("body", "file_actions", 1, "file_path"), "duplicate_path")],
    ),
    (
        "move source touched again",
        [
            {"action": "move", "file_path": "new", "previous_path": "old"},
            {"action": "chmod", "file_path": "old", "execute_filemode": True},
        ],
        [(("body", "file_actions", 1, "file_path"), "duplicate_path")],
    ),
    (
        "path later used as move source",
        [
            {"action": "create", "file_path": "old", "content": ""},
            {"action": "move", "file_path": "new", "previous_path": "old"},
        ],
        [(("body", "file_actions", 1, "previous_path"), "duplicate_path")],
    ),
    (
        "two moves from one source",
        [
            {"action": "move", "file_path": "x", "previous_path": "old"},
            {"action": "move", "file_path": "y", "previous_path": "old"},
        ],
        [(("body", "file_actions", 1, "previous_path"), "duplicate_path")],
    ),
    (
        "chained moves",
        [
            {"action": "move", "file_path": "b", "previous_path": "a"},
            {"action": "move", "file_path": "c", "previous_path": "b"},
        ],
        [(("body", "file_actions", 1, "previous_path"), "duplicate_path")],
    ),
    (
        "three uses, far apart",
        [
            {"action": "delete", "file_path": "z"},
            {"action": "delete", "file_path": "a"},
            {"action": "delete", "file_path": "y"},
            {"action": "delete", "file_path": "a"},
            {"action": "update", "file_path": "a", "content": ""},
        ],
        [
            (("body", "file_actions", 3, "file_path"), "duplicate_path"),
            (("body", "file_actions", 4, "file_path"), "duplicate_path"),
        ],
    ),
    (
        "paths differing in case are different files",
        [
            {"action": "delete", "file_path": "readme"},
            {"action": "delete", "file_path": "README"},
        ],
        [],
    ),
    (
        "prefix is not the same path",
        [
            {"action": "delete", "file_path": "a"},
            {"action": "delete", "file_path": "a/b"},
        ],
        [],
    ),
    (
        "move onto itself",
        [{"action": "move", "file_path": "same", "previous_path": "same"}],
        [(("body", "file_actions", 0, "file_path"), "invalid_move")],
    ),
]


@pytest.mark.parametrize(
    ("actions", "expected"),
    [case[1:] for case in DUPLICATE_CASES],
    ids=[case[0] for case in DUPLICATE_CASES],
)
def test_duplicate_paths(actions, expected):
    assert _check_actions(actions) == expected


def test_duplicate_message_names_the_first_use():
    parsed = MRWorkItemCreate.model_validate(
        _body(
            file_actions=[
                {"action": "delete", "file_path": "x"},
                {"action": "delete", "file_path": "a"},
                {"action": "move", "file_path": "b", "previous_path": "a"},
            ]
        )
    )
    (violation,) = check_submission(parsed, DEFAULT)
    assert violation.loc == ("body", "file_actions", 2, "previous_path")
    assert violation.message == "path 'a' is already used by file_actions[1]"


# --- everything at once -------------------------------------------------------


def test_all_violations_are_reported_together_with_exact_locations():
    config = MRTypeConfig(max_actions=4, max_file_bytes=4, max_total_bytes=4)
    body = _body(
        project="group",
        source_branch="bad..branch",
        title="",
        labels=["ok", "a,b"],
        file_actions=[
            {"action": "update", "file_path": "ok.txt", "content": "12345"},
            {"action": "create", "file_path": "b.bin", "content": "%%%", "encoding": "base64"},
            {"action": "delete", "file_path": "a/../b"},
            {"action": "chmod", "file_path": ".gitlab/run.sh", "execute_filemode": True},
            {"action": "move", "file_path": "ok.txt", "previous_path": "CODEOWNERS"},
        ],
    )
    violations = check_submission(MRWorkItemCreate.model_validate(body), config)
    assert [(v.loc, v.kind) for v in violations] == [
        (("body", "project"), "invalid_project"),
        (("body", "source_branch"), "invalid_branch"),
        (("body", "title"), "blank"),
        (("body", "labels", 1), "invalid_label"),
        (("body", "file_actions"), "too_many_actions"),
        (("body", "file_actions", 0, "content"), "too_large"),
        (("body", "file_actions", 1, "content"), "invalid_base64"),
        (("body", "file_actions", 2, "file_path"), "path_not_canonical"),
        (("body", "file_actions", 3, "file_path"), "path_blocked"),
        (("body", "file_actions", 4, "previous_path"), "path_blocked"),
        (("body", "file_actions", 4, "file_path"), "duplicate_path"),
        (("body", "file_actions"), "too_large"),
    ]


def test_violation_renders_as_a_fastapi_error_entry():
    violation = Violation(("body", "file_actions", 3, "file_path"), "nope", "path_blocked")
    assert violation.as_error() == {
        "loc": ["body", "file_actions", 3, "file_path"],
        "msg": "nope",
        "type": "path_blocked",
    }


def test_violations_are_immutable():
    violation = Violation(("body",), "m", "k")
    with pytest.raises(AttributeError):
        violation.message = "changed"


def test_policy_does_not_modify_the_submission():
    submission = MRWorkItemCreate.model_validate(_body(title=""))
    before = submission.model_dump()
    check_submission(submission, DEFAULT)
    assert submission.model_dump() == before


TARGET_CASES = [
    # Each row: config overrides, target_branch, the violations expected.
    ({}, "main", []),
    ({}, "release/2.4", []),
    ({}, "workqueue/other-bot", [(("body", "target_branch"), "target_not_allowed")]),
    ({}, "workqueue/", [(("body", "target_branch"), "invalid_branch")]),
    ({"source_branch_prefix": ""}, "workqueue/other-bot", []),
    ({"target_branches": ["main", "release/*"]}, "main", []),
    ({"target_branches": ["main", "release/*"]}, "release/2.4", []),
    (
        {"target_branches": ["main", "release/*"]},
        "release/2.4/hotfix",
        [(("body", "target_branch"), "target_not_allowed")],
    ),
    (
        {"target_branches": ["main", "release/*"]},
        "feature/alice",
        [(("body", "target_branch"), "target_not_allowed")],
    ),
    ({"target_branches": ["**"]}, "feature/alice", []),
    ({"target_branches": ["Main"]}, "main", [(("body", "target_branch"), "target_not_allowed")]),
]


@pytest.mark.parametrize(("overrides", "target", "expected"), TARGET_CASES)
def test_target_branches(overrides, target, expected):
    config = MRTypeConfig(**overrides)
    assert _check(config=config, target_branch=target) == expected
