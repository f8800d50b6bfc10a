"""Structure of the `mr` submission body: fields, defaults, the action union, strictness."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from workqueue.types.mr.schemas import (
    ChmodAction,
    CreateAction,
    DeleteAction,
    MoveAction,
    MRWorkItemCreate,
    UpdateAction,
)

API_MD_EXAMPLE = {
    "project": "group/sub/project",
    "source_branch": "workqueue/sync-kernel",
    "target_branch": "main",
    "title": "Sync kernel sources",
    "description": "optional MR description",
    "commit_message": "Sync sources from upstream",
    "package": "kernel",
    "change_kind": "sync",
    "labels": ["bot"],
    "auto_merge": True,
    "file_actions": [
        {"action": "update", "file_path": "kernel.spec", "content": "...", "encoding": "text"},
        {
            "action": "create",
            "file_path": "patches/new.patch",
            "content": "Li4u",
            "encoding": "base64",
        },
        {"action": "delete", "file_path": "old.txt"},
        {"action": "move", "file_path": "new/name.txt", "previous_path": "old/name.txt"},
        {"action": "chmod", "file_path": "run.sh", "execute_filemode": True},
    ],
}

MINIMAL = {
    "project": "42",
    "source_branch": "workqueue/x",
    "title": "t",
    "commit_message": "m",
    "file_actions": [{"action": "delete", "file_path": "a"}],
}


def _errors(body: object) -> list[tuple[tuple, str]]:
    with pytest.raises(ValidationError) as info:
        MRWorkItemCreate.model_validate(body)
    return [(tuple(e["loc"]), e["type"]) for e in info.value.errors()]


def _with_action(action: dict[str, object]) -> dict[str, object]:
    return {**MINIMAL, "file_actions": [{"action": "delete", "file_path": "x"}, action]}


def test_api_md_example_parses_into_the_right_action_classes():
    parsed = MRWorkItemCreate.model_validate(API_MD_EXAMPLE)
    assert [type(a) for a in parsed.file_actions] == [
        UpdateAction,
        CreateAction,
        DeleteAction,
        MoveAction,
        ChmodAction,
    ]
    assert parsed.file_actions[1].encoding == "base64"
    assert parsed.model_dump(exclude_unset=True) == API_MD_EXAMPLE


def test_json_input_parses_the_same_as_python_input():
    from_json = MRWorkItemCreate.model_validate_json(json.dumps(API_MD_EXAMPLE))
    assert from_json == MRWorkItemCreate.model_validate(API_MD_EXAMPLE)


def test_defaults():
    parsed = MRWorkItemCreate.model_validate(
        {
            **MINIMAL,
            "file_actions": [
                {"action": "create", "file_path": "a", "content": "x"},
                {"action": "move", "file_path": "b", "previous_path": "c"},
            ],
        }
    )
    assert parsed.target_branch is None
    assert parsed.description is None
    assert parsed.package is None
    assert parsed.change_kind is None
    assert parsed.labels == []
    assert parsed.auto_merge is True
    create, move = parsed.file_actions
    assert isinstance(create, CreateAction)
    assert create.encoding == "text"
    assert isinstance(move, MoveAction)
    assert move.content is None
    assert move.encoding == "text"


def test_labels_default_is_not_shared_between_instances():
    first = MRWorkItemCreate.model_validate(MINIMAL)
    second = MRWorkItemCreate.model_validate(MINIMAL)
    assert first.labels is not second.labels


@pytest.mark.parametrize(
    "field", ["project", "source_branch", "title", "commit_message", "file_actions"]
)
def test_required_top_level_fields(field):
    body = {k: v for k, v in MINIMAL.items() if k != field}
    assert _errors(body) == [((field,), "missing")]


MISSING_ACTION_FIELDS = [
    ({"action": "create", "file_path": "a"}, ("create", "content")),
    ({"action": "create", "content": "x"}, ("create", "file_path")),
    ({"action": "update", "file_path": "a"}, ("update", "content")),
    ({"action": "update", "content": "x"}, ("update", "file_path")),
    ({"action": "delete"}, ("delete", "file_path")),
    ({"action": "move", "file_path": "a"}, ("move", "previous_path")),
    ({"action": "move", "previous_path": "a"}, ("move", "file_path")),
    ({"action": "chmod", "file_path": "a"}, ("chmod", "execute_filemode")),
    ({"action": "chmod", "execute_filemode": True}, ("chmod", "file_path")),
]


@pytest.mark.parametrize(("action", "loc_tail"), MISSING_ACTION_FIELDS)
def test_required_action_fields(action, loc_tail):
    # Pydantic puts the union tag into the location of a tagged-union error.
    assert _errors(_with_action(action)) == [(("file_actions", 1, *loc_tail), "missing")]


EXTRA_ACTION_FIELDS = [
    ({"action": "delete", "file_path": "a", "content": "x"}, ("delete", "content")),
    ({"action": "delete", "file_path": "a", "encoding": "text"}, ("delete", "encoding")),
    (
        {"action": "chmod", "file_path": "a", "execute_filemode": True, "content": "x"},
        ("chmod", "content"),
    ),
    (
        {"action": "create", "file_path": "a", "content": "x", "previous_path": "b"},
        ("create", "previous_path"),
    ),
    (
        {"action": "update", "file_path": "a", "content": "x", "execute_filemode": True},
        ("update", "execute_filemode"),
    ),
    (
        {"action": "move", "file_path": "a", "previous_path": "b", "mode": "100755"},
        ("move", "mode"),
    ),
]


@pytest.mark.parametrize(("action", "loc_tail"), EXTRA_ACTION_FIELDS)
def test_unknown_action_fields_are_refused(action, loc_tail):
    assert _errors(_with_action(action)) == [(("file_actions", 1, *loc_tail), "extra_forbidden")]


@pytest.mark.parametrize("field", ["patch_data", "targetBranch", "id", "generation"])
def test_unknown_top_level_fields_are_refused(field):
    assert _errors({**MINIMAL, field: "x"}) == [((field,), "extra_forbidden")]


@pytest.mark.parametrize(
    ("action", "error_type"),
    [
        ({"action": "rename", "file_path": "a"}, "union_tag_invalid"),
        ({"action": "CREATE", "file_path": "a", "content": ""}, "union_tag_invalid"),
        ({"file_path": "a"}, "union_tag_not_found"),
        ("delete a", "model_attributes_type"),
    ],
)
def test_action_discriminator(action, error_type):
    assert _errors(_with_action(action)) == [(("file_actions", 1), error_type)]


@pytest.mark.parametrize("encoding", ["hex", "BASE64", "utf-8", ""])
@pytest.mark.parametrize("kind", ["create", "update"])
def test_encoding_must_be_text_or_base64(kind, encoding):
    action = {"action": kind, "file_path": "a", "content": "x", "encoding": encoding}
    assert _errors(_with_action(action)) == [
        (("file_actions", 1, kind, "encoding"), "literal_error")
    ]


STRICT_CASES = [
    ({"auto_merge": "false"}, ("auto_merge",), "bool_type"),
    ({"auto_merge": 0}, ("auto_merge",), "bool_type"),
    ({"auto_merge": None}, ("auto_merge",), "bool_type"),
    ({"title": 123}, ("title",), "string_type"),
    ({"title": None}, ("title",), "string_type"),
    ({"project": 42}, ("project",), "string_type"),
    ({"labels": "bot"}, ("labels",), "list_type"),
    ({"labels": ["bot", 1]}, ("labels", 1), "string_type"),
    ({"labels": None}, ("labels",), "list_type"),
    ({"file_actions": {"action": "delete"}}, ("file_actions",), "list_type"),
    ({"target_branch": 1}, ("target_branch",), "string_type"),
]


@pytest.mark.parametrize(("override", "loc", "error_type"), STRICT_CASES)
def test_types_are_strict(override, loc, error_type):
    assert _errors({**MINIMAL, **override}) == [(loc, error_type)]


@pytest.mark.parametrize("value", [1, "true", "yes", None])
def test_execute_filemode_must_be_a_boolean(value):
    action = {"action": "chmod", "file_path": "a", "execute_filemode": value}
    assert _errors(_with_action(action)) == [
        (("file_actions", 1, "chmod", "execute_filemode"), "bool_type")
    ]


def test_structure_only_empty_values_are_left_to_the_policy():
    parsed = MRWorkItemCreate.model_validate(
        {**MINIMAL, "project": "", "title": "", "file_actions": []}
    )
    assert parsed.project == ""
    assert parsed.file_actions == []


def test_models_are_frozen():
    parsed = MRWorkItemCreate.model_validate(MINIMAL)
    with pytest.raises(ValidationError):
        parsed.title = "changed"
    with pytest.raises(ValidationError):
        parsed.file_actions[0].file_path = "b"


def test_json_schema_publishes_the_discriminated_union():
    schema = MRWorkItemCreate.model_json_schema()
    items = schema["properties"]["file_actions"]["items"]
    assert items["discriminator"]["propertyName"] == "action"
    assert set(items["discriminator"]["mapping"]) == {"create", "update", "delete", "move", "chmod"}
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {
        "project",
        "source_branch",
        "title",
        "commit_message",
        "file_actions",
    }
