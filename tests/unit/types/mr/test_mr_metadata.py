"""`mr_metadata.plan_update` as a table: what an update changes, and what it keeps."""

from __future__ import annotations

from typing import Any

import pytest

from workqueue.types.mr.executors.metadata import (
    MRMetadata,
    SetMetadata,
    digest,
    plan_update,
    split_draft,
)


def meta(title: str = "Sync", description: str = "Automated", *labels: str) -> MRMetadata:
    return MRMetadata(title, description, labels)


# What the service set when it opened the MR: title "Sync", description
# "Automated", labels bot and sync.
SET = SetMetadata.of(meta("Sync", "Automated", "bot", "sync"), ["bot", "sync"])
WANTED = meta("Sync v2", "Automated v2", "bot", "kernel")

CASES: list[tuple[str, SetMetadata | None, MRMetadata, MRMetadata, dict[str, Any], list[str]]] = [
    # (name, remembered, on GitLab, submitted, changes sent, fields kept)
    (
        "nobody touched it: everything follows the submission",
        SET,
        meta("Sync", "Automated", "bot", "sync"),
        WANTED,
        {
            "title": "Sync v2",
            "description": "Automated v2",
            "add_labels": ["kernel"],
            "remove_labels": ["sync"],
        },
        [],
    ),
    (
        "nothing new: no call",
        SET,
        meta("Sync", "Automated", "bot", "sync"),
        meta("Sync", "Automated", "bot", "sync"),
        {},
        [],
    ),
    (
        "a person's title is kept",
        SET,
        meta("Kernel sync for QA", "Automated", "bot", "sync"),
        WANTED,
        {"description": "Automated v2", "add_labels": ["kernel"], "remove_labels": ["sync"]},
        ["title"],
    ),
    (
        "a person's draft alone: the new title under the person's prefix",
        SET,
        meta("[Draft] Sync", "Automated"),
        meta("Sync v2", "Automated"),
        {"title": "[Draft] Sync v2"},
        ["draft"],
    ),
    (
        "a person's draft and title: both kept",
        SET,
        meta("Draft: Held", "Automated"),
        meta("Sync v2", "Automated"),
        {},
        ["title", "draft"],
    ),
    (
        "the submission's draft under a person's title",
        SET,
        meta("Held", "Automated"),
        meta("Draft: Sync v2", "Automated"),
        {"title": "Draft: Held"},
        ["title"],
    ),
    (
        "a person marks the service's draft ready: it stays ready",
        SetMetadata.of(meta("Draft: Sync", "Automated"), []),
        meta("Sync", "Automated"),
        meta("Draft: Sync v2", "Automated"),
        {"title": "Sync v2"},
        ["draft"],
    ),
    (
        "the submission drops its own draft",
        SetMetadata.of(meta("Draft: Sync", "Automated"), []),
        meta("Draft: Sync", "Automated"),
        meta("Sync", "Automated"),
        {"title": "Sync"},
        [],
    ),
    (
        "a person's description is kept",
        SET,
        meta("Sync", "Wait for QA", "bot", "sync"),
        meta("Sync", "Automated v2", "bot", "sync"),
        {},
        ["description"],
    ),
    (
        "a person's value equal to the submission's: nothing kept, nothing sent",
        SET,
        meta("Sync v2", "Automated", "bot", "sync"),
        meta("Sync v2", "Automated", "bot", "sync"),
        {},
        [],
    ),
    (
        "labels: a person's added one stays, a service one a person removed stays removed",
        SET,
        meta("Sync", "Automated", "bot", "needs-qa"),
        meta("Sync", "Automated", "bot", "sync", "kernel"),
        {"add_labels": ["kernel"]},
        ["labels"],
    ),
    (
        "nothing remembered (before 0017): title and description follow, no label removed",
        None,
        meta("Old title", "Old words", "bot", "stale"),
        WANTED,
        {"title": "Sync v2", "description": "Automated v2", "add_labels": ["kernel"]},
        ["labels"],
    ),
]


@pytest.mark.parametrize(
    ("remembered", "shown", "wanted", "changes", "kept"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_plan_update(remembered, shown, wanted, changes, kept):
    plan = plan_update(remembered, shown, wanted)
    assert plan.changes == changes
    assert [edit.field for edit in plan.kept] == kept


def test_kept_labels_name_who_added_and_removed_what():
    plan = plan_update(
        SET, meta("Sync", "Automated", "bot", "needs-qa"), meta("Sync", "Automated", "bot", "sync")
    )
    (labels,) = plan.kept
    assert (labels.added_by_people, labels.removed_by_people) == (("needs-qa",), ("sync",))


def test_what_is_remembered_keeps_a_persons_fields_out():
    shown = meta("Held", "Wait for QA", "bot", "sync")
    plan = plan_update(SET, shown, WANTED)
    answer = meta("Held", "Wait for QA", "bot", "kernel")
    remembered = plan.remembered(SET, answer)
    # Still what the service set, so the person's edit keeps counting as theirs...
    assert (remembered.title, remembered.description) == (SET.title, SET.description)
    # ...and the labels are the ones this submission named.
    assert remembered.labels == {digest("bot"), digest("kernel")}
    assert SetMetadata.from_stored(remembered.stored()) == remembered


@pytest.mark.parametrize(
    ("set_before", "shown", "wanted", "ours"),
    [
        # A person's label the submission names is already there: still the person's.
        (SET, ("bot", "sync", "hold"), ("bot", "sync", "hold"), {"bot", "sync"}),
        # One the service adds is its own; one it set and still names stays its own.
        (SET, ("bot", "sync"), ("bot", "kernel"), {"bot", "kernel"}),
        # One it set that a person removed stays remembered, so it stays removed.
        (SET, ("bot",), ("bot", "sync"), {"bot", "sync"}),
        # Nothing remembered (before 0017): only what it adds now becomes its own.
        (None, ("bot", "hold"), ("bot", "hold", "kernel"), {"kernel"}),
    ],
)
def test_labels_are_the_services_only_when_it_set_them(set_before, shown, wanted, ours):
    plan = plan_update(set_before, meta("Sync", "Automated", *shown), meta("Sync", "A", *wanted))
    remembered = plan.remembered(set_before, meta("Sync", "A", *(set(shown) | set(wanted))))
    assert remembered.labels == {digest(label) for label in ours}


def test_gitlabs_answer_is_remembered_not_what_was_sent():
    plan = plan_update(SET, meta("Sync", "Automated"), meta("Sync v2  ", "Automated"))
    remembered = plan.remembered(SET, meta("Sync v2", "Automated"))
    assert remembered.title == digest("Sync v2")


@pytest.mark.parametrize(
    ("title", "parts"),
    [
        ("Sync", ("", "Sync")),
        ("Draft: Sync", ("Draft: ", "Sync")),
        ("draft:Sync", ("draft:", "Sync")),
        ("[Draft] Sync", ("[Draft] ", "Sync")),
        ("(DRAFT) Sync", ("(DRAFT) ", "Sync")),
        ("Draft: [Draft] Sync", ("Draft: [Draft] ", "Sync")),
        ("Drafting: Sync", ("", "Drafting: Sync")),
        ("Sync Draft:", ("", "Sync Draft:")),
        ("WIP: Sync", ("", "WIP: Sync")),  # no longer a draft prefix since GitLab 14
    ],
)
def test_split_draft(title, parts):
    assert split_draft(title) == parts
