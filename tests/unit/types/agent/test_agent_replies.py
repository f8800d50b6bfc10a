"""What the service posts for the agent: neutralised when GitLab would act on it."""

from __future__ import annotations

import uuid

import pytest

from workqueue.types.agent.replies import (
    NEUTRALISED_NOTICE,
    marked_task,
    placeholder,
    refused_text,
    reply_text,
    would_act,
)

TASK = uuid.UUID("11111111-2222-4333-8444-555555555555")


@pytest.mark.parametrize(
    ("text", "acts"),
    [
        ("Done: bumped to 2.1, see #3 and !4", False),  # own-project references
        ("mail bob@example.com", False),
        ("run `make test` then push", False),
        ("thanks @alice", True),
        ("cc @all", True),
        ("&#64;here", True),  # an entity GitLab renders as @
        ("@\u200balice", True),  # an invisible character after @
        ("/merge", True),
        ("  /approve", True),
        ("\\/merge", True),  # rendered as /merge
        ("\uff0fmerge", True),  # a full-width slash, normalised
        ("ok\n```\n/merge\n```", True),  # code fences do not make it safe here
        ("see victim/prod#1", True),
        ("closes &3", True),  # an epic
        ("fine \\/merge inline", False),  # not at the start of a line
    ],
)
def test_would_act(text, acts):
    assert would_act(text, "team/app") is acts


def test_a_safe_reply_is_posted_as_written_with_its_marker():
    posted = reply_text(TASK, "Bumped to **2.1**.", "team/app", mr_line="MR item: x")
    assert posted.startswith(f"<!-- workqueue-task:{TASK} -->")
    assert "Bumped to **2.1**." in posted
    assert posted.endswith("MR item: x")
    assert marked_task(posted) == TASK


def test_an_acting_reply_becomes_an_indented_code_block():
    posted = reply_text(TASK, "Done @all\n```\n/merge\n/approve", "team/app", mr_line=None)
    assert NEUTRALISED_NOTICE in posted
    body = posted.split(NEUTRALISED_NOTICE, 1)[1].strip("\n")
    assert all(line.startswith("    ") for line in body.splitlines())
    # No line of what is posted starts a quick action, whatever fences the agent wrote.
    assert not any(
        line.lstrip().startswith("/") and not line.startswith("    ")
        for line in posted.splitlines()
    )


def test_secrets_are_redacted_in_replies():
    key = "glpat-" + "A1b2C3d4E5f6G7h8I9j0"
    posted = reply_text(TASK, f"use token {key}", "team/app", mr_line=None)
    assert key not in posted


def test_refusals_and_placeholders_name_the_task():
    refused = refused_text(TASK, "touches .gitlab-ci.yml", reply="ok @all", project="team/app")
    assert marked_task(refused) == TASK
    assert "`touches .gitlab-ci.yml`" in refused
    assert NEUTRALISED_NOTICE in refused
    assert marked_task(placeholder(TASK, "https://wq.example/ui/items/x")) == TASK
    assert marked_task("no marker here") is None
