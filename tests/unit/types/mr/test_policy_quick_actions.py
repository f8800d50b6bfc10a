"""Descriptions must not carry GitLab quick actions (`/merge`, `/close`, ...): a table."""

from __future__ import annotations

import pytest

from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.policy import check_submission, quick_action_line

DESCRIPTION = ("body", "description")

LINE_CASES = [
    # (description, first offending line or None)
    ("/merge", 1),
    ("/close", 1),
    ("/assign @someone", 1),
    ("/", 1),
    ("/unknown_future_command", 1),
    ("  /merge", 1),
    ("\t/merge", 1),
    (" \t \t/merge", 1),
    ("\u00a0/merge", 1),  # a no-break space is still blank
    ("\u3000/merge", 1),
    ("Sync sources.\n/merge", 2),
    ("Sync sources.\n\nDetails\n  /approve\nmore", 4),
    ("Sync sources.\r\n/merge\r\n", 2),  # CRLF
    ("first\r/merge", 2),  # a lone CR
    ("first\u2028/merge", 2),
    ("first\u2029/merge", 2),
    ("ok\n\n\n/label ~x", 4),
    ("a\n/b\n/c", 2),  # the first one is named
    # Not quick actions: a slash that is not the first character of its line.
    ("", None),
    ("Sync sources", None),
    ("a/b", None),
    ("see a/b and /merge mid-line", None),
    ("path: /usr/bin", None),
    ("https://gitlab.example.com/a/b", None),
    ("line one\nline two a/b\n", None),
    ("x /close", None),
    ("\\/close", None),
    ("`/close`", None),
    ("- /close", None),
    ("\u200b/close", None),  # a zero-width space is not blank; GitLab needs '/' first
]


@pytest.mark.parametrize(("text", "line"), LINE_CASES)
def test_quick_action_line(text, line):
    assert quick_action_line(text) == line


def _check(description: str | None) -> list[tuple]:
    submission = MRWorkItemCreate.model_validate(
        {
            "project": "group/project",
            "source_branch": "workqueue/sync",
            "title": "Sync",
            "description": description,
            "commit_message": "/not-checked: commit messages are not descriptions",
            "file_actions": [{"action": "delete", "file_path": "a"}],
        }
    )
    return [(v.loc, v.kind, v.message) for v in check_submission(submission, MRTypeConfig())]


@pytest.mark.parametrize(("text", "line"), [case for case in LINE_CASES if case[1] is not None])
def test_a_quick_action_in_the_description_is_a_422_on_the_description(text, line):
    ((loc, kind, message),) = _check(text)
    assert (loc, kind) == (DESCRIPTION, "quick_action")
    assert f"line {line}" in message


@pytest.mark.parametrize("text", [case[0] for case in LINE_CASES if case[1] is None])
def test_descriptions_without_quick_actions_pass(text):
    assert _check(text) == []


def test_no_description_passes():
    assert _check(None) == []
