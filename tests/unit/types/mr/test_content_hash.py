"""`content_hash`: what counts as a change of an `mr` submission for the upsert."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.policy import content_hash

BASE: dict[str, object] = {
    "project": "group/project",
    "source_branch": "workqueue/sync",
    "target_branch": "main",
    "title": "Sync",
    "description": "desc",
    "commit_message": "Sync sources",
    "package": "kernel",
    "change_kind": "sync",
    "labels": ["bot", "sync"],
    "auto_merge": True,
    "file_actions": [
        {"action": "update", "file_path": "a.txt", "content": "hello"},
        {"action": "create", "file_path": "b.bin", "content": "AAEC", "encoding": "base64"},
        {"action": "delete", "file_path": "c"},
        {"action": "move", "file_path": "d2", "previous_path": "d1"},
        {"action": "chmod", "file_path": "run.sh", "execute_filemode": True},
    ],
}


def _hash(**overrides: object) -> str:
    return content_hash(MRWorkItemCreate.model_validate({**BASE, **overrides}))


def _actions(*replacements: tuple[int, dict[str, object]]) -> list[dict[str, object]]:
    actions = [dict(a) for a in BASE["file_actions"]]
    for index, action in replacements:
        actions[index] = action
    return actions


def test_format_is_sha256_hex():
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", _hash())


def test_canonical_form_is_pinned():
    # Stored hashes decide `unchanged` vs `updated`: changing the canonical
    # form would turn every next resubmission into an update. This spells
    # the form out independently of the implementation.
    def sha(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    canonical = (
        '{"auto_merge":true,"commit_message":"Sync sources","description":"desc",'
        '"file_actions":['
        '{"action":"update","content_sha256":"' + sha(b"hello") + '","file_path":"a.txt"},'
        '{"action":"create","content_sha256":"' + sha(b"\x00\x01\x02") + '","file_path":"b.bin"},'
        '{"action":"delete","file_path":"c"},'
        '{"action":"move","content_sha256":null,"file_path":"d2","previous_path":"d1"},'
        '{"action":"chmod","execute_filemode":true,"file_path":"run.sh"}'
        '],"labels":["bot","sync"],"target_branch":"main","title":"Sync caf\\u00e9"}'
    )
    assert _hash(title="Sync café") == "sha256:" + sha(canonical.encode("ascii"))


def test_nfc_and_nfd_spellings_are_different_content():
    # No Unicode normalisation: GitLab stores exactly the string it is sent.
    assert _hash(title="caf\u00e9") != _hash(title="cafe\u0301")


def test_equal_submissions_hash_equal():
    assert _hash() == _hash()


CHANGES = [
    ("target_branch", {"target_branch": "develop"}),
    ("target_branch omitted", {"target_branch": None}),
    ("title", {"title": "Sync!"}),
    ("description", {"description": "desc2"}),
    ("description omitted", {"description": None}),
    ("description empty", {"description": ""}),
    ("commit_message", {"commit_message": "Sync sources "}),
    ("label added", {"labels": ["bot", "sync", "x"]}),
    ("label removed", {"labels": ["bot"]}),
    ("labels are case-sensitive", {"labels": ["Bot", "sync"]}),
    ("auto_merge", {"auto_merge": False}),
    (
        "text content",
        {
            "file_actions": _actions(
                (0, {"action": "update", "file_path": "a.txt", "content": "hellO"})
            )
        },
    ),
    (
        "binary content",
        {
            "file_actions": _actions(
                (
                    1,
                    {
                        "action": "create",
                        "file_path": "b.bin",
                        "content": "AAED",
                        "encoding": "base64",
                    },
                )
            )
        },
    ),
    (
        "action kind",
        {
            "file_actions": _actions(
                (0, {"action": "create", "file_path": "a.txt", "content": "hello"})
            )
        },
    ),
    (
        "file_path",
        {"file_actions": _actions((2, {"action": "delete", "file_path": "C"}))},
    ),
    (
        "previous_path",
        {
            "file_actions": _actions(
                (3, {"action": "move", "file_path": "d2", "previous_path": "d0"})
            )
        },
    ),
    (
        "move gains content",
        {
            "file_actions": _actions(
                (3, {"action": "move", "file_path": "d2", "previous_path": "d1", "content": ""})
            )
        },
    ),
    (
        "execute_filemode",
        {
            "file_actions": _actions(
                (4, {"action": "chmod", "file_path": "run.sh", "execute_filemode": False})
            )
        },
    ),
    ("action removed", {"file_actions": _actions()[:-1]}),
    ("actions reordered", {"file_actions": list(reversed(_actions()))}),
]


@pytest.mark.parametrize("override", [c[1] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_covered_changes_change_the_hash(override):
    assert _hash(**override) != _hash()


NO_CHANGES = [
    ("project", {"project": "123"}),
    ("source_branch", {"source_branch": "workqueue/other"}),
    ("package", {"package": None}),
    ("change_kind", {"change_kind": "bump"}),
    ("labels reordered", {"labels": ["sync", "bot"]}),
    ("labels repeated", {"labels": ["bot", "sync", "bot"]}),
    (
        "same bytes as base64 instead of text",
        {
            "file_actions": _actions(
                (
                    0,
                    {
                        "action": "update",
                        "file_path": "a.txt",
                        "content": base64.b64encode(b"hello").decode(),
                        "encoding": "base64",
                    },
                )
            )
        },
    ),
    (
        "explicit default encoding",
        {
            "file_actions": _actions(
                (
                    0,
                    {
                        "action": "update",
                        "file_path": "a.txt",
                        "content": "hello",
                        "encoding": "text",
                    },
                )
            )
        },
    ),
]


@pytest.mark.parametrize("override", [c[1] for c in NO_CHANGES], ids=[c[0] for c in NO_CHANGES])
def test_uncovered_fields_and_equivalent_forms_keep_the_hash(override):
    assert _hash(**override) == _hash()


def test_field_boundaries_are_unambiguous():
    # Moving text from one field to the next must not collide.
    first = _hash(title="ab", description="c")
    second = _hash(title="a", description="bc")
    assert first != second


def test_unicode_and_lone_surrogates_in_text_fields_hash_without_error():
    assert _hash(title="ünïcödé 😀") != _hash(title="unicode")
    assert _hash(title="bad\ud800").startswith("sha256:")


@pytest.mark.parametrize(
    "action",
    [
        {"action": "create", "file_path": "f", "content": "QQ", "encoding": "base64"},
        {"action": "create", "file_path": "f", "content": "bad\ud800"},
    ],
)
def test_undecodable_content_raises_value_error(action):
    submission = MRWorkItemCreate.model_validate({**BASE, "file_actions": [action]})
    with pytest.raises(ValueError, match=r"."):
        content_hash(submission)
