"""Text that writes elsewhere (`text_rules.py`): what is found, as a table, and the 422s."""

from __future__ import annotations

import unicodedata

import pytest

from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation import text_rules
from workqueue.types.mr.validation.policy import check_submission
from workqueue.types.mr.validation.text_rules import (
    FindingKind,
    Reading,
    field_violations,
    written_elsewhere,
)

OWN = "team/app"
REF, EPIC, MENTION = FindingKind.REFERENCE, FindingKind.EPIC, FindingKind.MENTION

FOUND_CASES = [
    # (text, what is found as (kind, text)) for an item of team/app
    # -- the project's own items, plain text ------------------------------------
    ("#123", []),
    ("!5", []),
    ("Closes #12", []),
    ("Fixes team/app#3 and team/app!4", []),
    ("Fixes Team/App#3", []),  # GitLab resolves paths case-insensitively
    ("see /team/app#3", []),  # the absolute form of the same path
    ("reverts team/app@abc1234", []),
    ("Closes #1, #2 and #3", []),
    ("see victim/prod for details", []),  # a path without a sigil names nothing
    ("C# and F#", []),
    ("# Heading\n## Sub", []),
    ("Version 1.2 & 3", []),
    ("Closes PROJ-123 and fixes CVE-2024-1234, UTF-8", []),  # Jira keys: not judged
    ("issue #1 and !2 (#3)", []),
    ("![image](logo.png)", []),
    ("Wow!! #1", []),
    # -- e-mail addresses and links ------------------------------------------------
    ("mail bot@example.com or first.last+tag@example.co.uk", []),
    ("dev@cafe1234.example", []),  # hex after '@', but an e-mail domain
    ("<bob@example.com>", []),
    ("x@y", []),
    ("email me @ home", []),
    ("https://example.com/page#123", []),  # an anchor inside a link
    ("https://medium.com/@alice/post", []),  # '@' inside a link
    ("https://gitlab.example.com/team/app/-/issues/3", []),
    ("https://gitlab.example.com/team/app/-/merge_requests/2#note_3", []),
    ("https://gitlab.example.com/team/app/issues/3", []),
    ("https://gitlab.example.com/team/app/-/commit/abc1234", []),
    ("https://gitlab.example.com/victim/prod", []),  # a project page is no item
    ("https://gitlab.example.com/victim/prod/-/tree/main", []),
    ("https://gitlab.example.com/issues/3", []),
    ("[CI](https://gitlab.example.com/team/app/-/pipelines/5)", []),
    # -- other projects' issues, MRs, work items, commits ------------------------------
    ("victim/prod#1", [(REF, "victim/prod#1")]),
    ("victim/prod!2", [(REF, "victim/prod!2")]),
    ("group/sub/proj!2", [(REF, "group/sub/proj!2")]),
    ("/victim/prod#1", [(REF, "/victim/prod#1")]),  # absolute form
    ("-victim/prod#1", [(REF, "-victim/prod#1")]),
    ("other#5", [(REF, "other#5")]),  # a sibling project, or a group's work item
    ("app#5", [(REF, "app#5")]),  # the own project's shorthand: refused, not guessed
    ("victim#7", [(REF, "victim#7")]),
    ("team/app/sub#1", [(REF, "team/app/sub#1")]),
    ("team/ap#1", [(REF, "team/ap#1")]),
    ("issue#12", [(REF, "issue#12")]),  # GitLab reads a project called 'issue'
    ("(victim/prod#1)", [(REF, "victim/prod#1")]),
    ("victim/prod#1+", [(REF, "victim/prod#1")]),  # GitLab's title expansion
    ("victim/prod@abc1234", [(REF, "victim/prod@abc1234")]),
    ("victim/prod@abc1234...def5678", [(REF, "victim/prod@abc1234")]),
    ("[work_item:victim/prod/5]", [(REF, "[work_item:victim/prod/5]")]),
    ("[work_item:5]", []),
    ("[work_item:team/app/5]", []),
    (
        "Closes victim/prod#1, victim/prod#2 and https://gitlab.example.com/victim/prod/-/issues/3",
        [
            (REF, "victim/prod#1"),
            (REF, "victim/prod#2"),
            (REF, "https://gitlab.example.com/victim/prod/-/issues/3"),
        ],
    ),
    # -- links to other projects' items, any host ------------------------------------
    (
        "https://h/victim/prod/-/merge_requests/2",
        [(REF, "https://h/victim/prod/-/merge_requests/2")],
    ),
    ("http://h/victim/prod/merge_requests/2", [(REF, "http://h/victim/prod/merge_requests/2")]),
    ("http://h/victim/prod/issues/3", [(REF, "http://h/victim/prod/issues/3")]),
    ("HTTPS://H/victim/prod/-/issues/3", [(REF, "HTTPS://H/victim/prod/-/issues/3")]),
    ("https://h/victim/prod/-/work_items/9", [(REF, "https://h/victim/prod/-/work_items/9")]),
    (
        "https://h/victim/prod/-/issues/incident/4",
        [(REF, "https://h/victim/prod/-/issues/incident/4")],
    ),
    ("https://h/victim/prod/-/commit/abc1234", [(REF, "https://h/victim/prod/-/commit/abc1234")]),
    ("https://h/groups/victim/-/work_items/3", [(REF, "https://h/groups/victim/-/work_items/3")]),
    ("https://h/victim%2Fprod/-/issues/3", [(REF, "https://h/victim%2Fprod/-/issues/3")]),
    (
        "https://h/victim/prod/-/issues/3?x=1#note_2",
        [(REF, "https://h/victim/prod/-/issues/3?x=1#note_2")],
    ),
    ("www.h.example/victim/prod/-/issues/3", [(REF, "www.h.example/victim/prod/-/issues/3")]),
    # A path to another project's item outside a link: a relative link, say.
    ("[fix](/victim/prod/-/issues/3)", [(REF, "/victim/prod/-/issues/3")]),
    ("see victim/prod/-/merge_requests/2", [(REF, "victim/prod/-/merge_requests/2")]),
    ("/groups/victim/-/epics/3", [(EPIC, "/groups/victim/-/epics/3")]),
    ("[fix](/team/app/-/issues/3)", []),
    ("docs/-/issues/x", []),
    # A scheme-less address stays text: GitLab may not link it.
    ("www.h.example/@all", [(MENTION, "@all")]),
    ("www.h.example/team/app/-/issues/3", []),
    # Only http and https are links; a longer word before the scheme is no scheme.
    ("xhttps://h/@all", [(MENTION, "@all")]),
    ("ftp://h/victim/prod#1", [(REF, "//h/victim/prod#1")]),
    ("https://github.com/org/repo/issues/12", [(REF, "https://github.com/org/repo/issues/12")]),
    ("[fix](https://h/victim/prod/-/issues/3)", [(REF, "https://h/victim/prod/-/issues/3")]),
    # A link ends at a bracket or quote: what follows is read as text, as GitLab does.
    ("[x](https://h/)victim/prod#1", [(REF, "victim/prod#1")]),
    ('<a href="https://h/">victim/prod#1</a>', [(REF, "victim/prod#1")]),
    # -- epics: always a group's -----------------------------------------------------
    ("&3", [(EPIC, "&3")]),
    ("group&3", [(EPIC, "group&3")]),
    ("group/sub&3", [(EPIC, "group/sub&3")]),
    ("team&3", [(EPIC, "team&3")]),  # the project's own group: still an epic
    ("[epic:group/3]", [(EPIC, "[epic:group/3]")]),
    ("[epic:3]", [(EPIC, "[epic:3]")]),
    ("https://h/groups/victim/-/epics/3", [(EPIC, "https://h/groups/victim/-/epics/3")]),
    ("https://h/groups/victim/epics/3", [(EPIC, "https://h/groups/victim/epics/3")]),
    # -- mentions ----------------------------------------------------------------------
    ("@all", [(MENTION, "@all")]),
    ("@here", [(MENTION, "@here")]),
    ("cc @alice.", [(MENTION, "@alice")]),
    ("(@bob)", [(MENTION, "@bob")]),
    ("@team/leads", [(MENTION, "@team/leads")]),
    ("@abc1234", [(MENTION, "@abc1234")]),
    ("x.@all", [(MENTION, "@all")]),
    ('"quoted"@example.com', [(MENTION, "@example.com")]),
    ("é@alice", [(MENTION, "@alice")]),  # GitLab's \w is ASCII: this is a mention
    ("@@alice", [(MENTION, "@alice")]),
    ("/assign_reviewer me, @all", [(MENTION, "@all")]),
    # -- code is text too: GitLab's closing scan reads the raw message -----------------
    ("`Closes victim/prod#1`", [(REF, "victim/prod#1")]),
    ("```\nFixes victim/prod#4\n```", [(REF, "victim/prod#4")]),
    ("    @decorator\n    def f(): ...", [(MENTION, "@decorator")]),
    # -- what Markdown renders ---------------------------------------------------------
    ("victim/prod\\#1", [(REF, "victim/prod#1")]),
    ("\\@all", [(MENTION, "@all")]),
    ("victim/prod&#35;1", [(REF, "victim/prod#1")]),
    ("victim/prod&#x23;1", [(REF, "victim/prod#1")]),
    ("&#64;all", [(MENTION, "@all")]),
    ("&commat;all", [(MENTION, "@all")]),
    ("&amp;3", [(EPIC, "&3")]),
    ("&amp;#64;all", []),  # renders as the text '&#64;all'
    # -- Unicode look-alikes and invisible characters -----------------------------------
    ("\uff20all", [(MENTION, "@all")]),  # FULLWIDTH COMMERCIAL AT
    ("\ufe6balice", [(MENTION, "@alice")]),  # SMALL COMMERCIAL AT
    ("@\u200ball", [(MENTION, "@all")]),  # a zero-width space after '@'
    ("@\u2060all", [(MENTION, "@all")]),  # WORD JOINER
    ("@\u034fall", [(MENTION, "@all")]),  # COMBINING GRAPHEME JOINER
    ("victim/prod\uff03\uff11", [(REF, "victim/prod#1")]),  # full-width '#1'
    ("victim/prod\u200b#1", [(REF, "victim/prod#1")]),
    ("victim\uff0fprod#1", [(REF, "prod#1"), (REF, "victim/prod#1")]),
    ("\u202evictim/prod#1", [(REF, "victim/prod#1")]),  # a bidi override before it
    ("caf\u00e9 #1", []),
]


@pytest.mark.parametrize(("text", "expected"), FOUND_CASES)
def test_what_is_found(text, expected):
    found = [(finding.kind, finding.text) for finding in written_elsewhere(text, OWN)]
    assert found == expected


CLOSING_CASES = [
    # (text, the closing flag of each finding)
    ("Closes victim/prod#1", [True]),
    ("closes: victim/prod#1", [True]),
    ("Fixes issue victim/prod#1", [True]),
    ("Resolves victim/prod#1, victim/prod#2 and victim/prod#3", [True, True, True]),
    ("Implements https://h/victim/prod/-/issues/3", [True]),
    ("Closes #1 and victim/prod!2", [True]),
    ("See victim/prod#1", [False]),
    ("Closes #1. Related: victim/prod#2", [False]),
    ("Enclosed victim/prod#1", [False]),
]


@pytest.mark.parametrize(("text", "closing"), CLOSING_CASES)
def test_references_in_closing_patterns_are_marked(text, closing):
    assert [finding.closing for finding in written_elsewhere(text, OWN)] == closing


def test_each_reading_is_named():
    (written,) = written_elsewhere("victim/prod#1", OWN)
    (rendered,) = written_elsewhere("victim/prod&#35;1", OWN)
    (normalised,) = written_elsewhere("\uff20all", OWN)
    assert [written.reading, rendered.reading, normalised.reading] == [
        Reading.AS_WRITTEN,
        Reading.RENDERED,
        Reading.NORMALISED,
    ]


def test_an_unresolved_numeric_id_makes_every_path_foreign():
    assert [f.text for f in written_elsewhere("Fixes team/app#3 and #4", "42")] == ["team/app#3"]


def test_every_invisible_format_character_is_removed():
    """The hand-written class covers Unicode category Cf of this Python's database."""
    format_characters = [
        chr(code) for code in range(0x110000) if unicodedata.category(chr(code)) == "Cf"
    ]
    assert [c for c in format_characters if not text_rules._INVISIBLE.match(c)] == []


# --- the 422 entries ---------------------------------------------------------------


def test_a_field_with_references_and_mentions_gets_one_entry_for_each():
    violations = field_violations(
        "description", "Closes victim/prod#1 and &3, cc @all", own_project=OWN
    )
    assert [(v.loc, v.kind) for v in violations] == [
        (("body", "description"), "cross_project_reference"),
        (("body", "description"), "mention"),
    ]
    references, mentions = (v.message for v in violations)
    assert "'victim/prod#1' (in a closing pattern)" in references
    assert "'&3' (an epic)" in references
    assert "outside project team/app" in references
    assert "allow_cross_project_references" in references
    assert "'@all'" in mentions
    assert "allow_mentions" in mentions


def test_a_decoded_finding_says_how_it_was_read():
    (violation,) = field_violations("title", "&#64;all", own_project=OWN)
    assert "'@all' (as GitLab renders it)" in violation.message


def test_the_message_quotes_five_and_counts_the_rest():
    text = " ".join(f"victim/prod#{n}" for n in range(1, 9))
    (violation,) = field_violations("commit_message", text, own_project=OWN)
    assert "'victim/prod#5'" in violation.message
    assert "'victim/prod#6'" not in violation.message
    assert "and 3 more" in violation.message


def test_a_long_link_is_quoted_shortened():
    url = "https://h/victim/prod/-/issues/3?" + "x" * 500
    (violation,) = field_violations("description", url, own_project=OWN)
    assert url not in violation.message
    assert "https://h/victim/prod/-/issues/3?xx" in violation.message


OPT_IN_CASES = [
    # (allow_mentions, allow_cross_project_references, kinds refused)
    (False, False, ["cross_project_reference", "mention"]),
    (True, False, ["cross_project_reference"]),
    (False, True, ["mention"]),
    (True, True, []),
]


@pytest.mark.parametrize(("mentions", "references", "kinds"), OPT_IN_CASES)
def test_each_opt_in_lets_its_own_kind_through(mentions, references, kinds):
    violations = field_violations(
        "description",
        "Closes victim/prod#1, group&2, cc @all",
        own_project=OWN,
        allow_mentions=mentions,
        allow_cross_project_references=references,
    )
    assert [v.kind for v in violations] == kinds


# --- through the policy ---------------------------------------------------------------


def _submission(project: str = OWN, **fields: object) -> MRWorkItemCreate:
    body = {
        "project": project,
        "source_branch": "workqueue/sync",
        "title": "Sync",
        "commit_message": "Sync from upstream",
        "file_actions": [{"action": "delete", "file_path": "a"}],
        **fields,
    }
    return MRWorkItemCreate.model_validate(body)


def _refusals(submission: MRWorkItemCreate, **options: object) -> list[tuple]:
    config = MRTypeConfig.model_validate(options)
    return [(v.loc, v.kind) for v in check_submission(submission, config)]


POLICY_CASES = [
    # the submission's fields, then what the policy refuses
    ({"title": "Fixes victim/prod#1"}, [(("body", "title"), "cross_project_reference")]),
    ({"description": "cc @all"}, [(("body", "description"), "mention")]),
    (
        {"commit_message": "Fixes victim/prod#4"},
        [(("body", "commit_message"), "cross_project_reference")],
    ),
    ({"description": "Closes #1", "commit_message": "Fixes team/app#2"}, []),
    # A field refused already is not scanned as well.
    ({"description": "/assign @alice"}, [(("body", "description"), "quick_action")]),
    ({"title": "@all\x07"}, [(("body", "title"), "invalid_character")]),
]


@pytest.mark.parametrize(("fields", "refusals"), POLICY_CASES)
def test_the_policy_refuses_each_text_field(fields, refusals):
    assert _refusals(_submission(**fields)) == refusals


def test_the_policy_honours_the_opt_ins():
    submission = _submission(description="Closes victim/prod#1, cc @all")
    assert _refusals(submission, allow_mentions=True, allow_cross_project_references=True) == []


def test_a_numeric_id_waits_for_its_resolved_path():
    """Before resolution the route cannot tell `team/app#3` from a foreign path: it
    judges nothing; `submit_mr` checks again with the resolved path."""
    submission = _submission("42", commit_message="Fixes team/app#3, victim/prod#4, @all")
    assert _refusals(submission) == []
    config = MRTypeConfig()
    resolved = check_submission(submission, config, project_path=OWN)
    assert [(v.kind, "team/app#3" in v.message) for v in resolved] == [
        ("cross_project_reference", False),
        ("mention", False),
    ]
    unresolved = check_submission(submission, config, project_path="42")
    assert "team/app#3" in unresolved[0].message


def test_a_project_path_is_judged_before_resolution():
    assert _refusals(_submission(description="Fixes victim/prod#1")) == [
        (("body", "description"), "cross_project_reference")
    ]


# A quadratic scan of a megabyte takes hours; the linear one, milliseconds.
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text",
    [
        "a-" * 500_000,
        "a/" * 500_000,
        "Closes " + "a" * 1_000_000,
        "#1" * 500_000,
        "@" * 1_000_000,
        "&#64;" * 200_000,
        "https://h/" + "a/" * 500_000,
        "fix " * 250_000,
        "a/-/" * 250_000,
        "www." * 250_000,
    ],
    ids=[
        "dashes",
        "slashes",
        "closing",
        "refs",
        "ats",
        "entities",
        "url",
        "keywords",
        "item-paths",
        "addresses",
    ],
)
def test_a_megabyte_of_hostile_text_is_judged_without_backtracking(text):
    field_violations("description", text, own_project=OWN)
