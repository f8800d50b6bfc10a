"""Which commits and MRs are the service's own: the trailer, the author check, MR sorting."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from workqueue.gitlab.models import CommitInfo, MergeRequestInfo, UserInfo
from workqueue.types.mr.authorship import (
    is_own_head,
    is_own_rebase,
    made_by,
    sort_open_mrs,
    stamp,
    stamped_content,
    stamped_item,
)

ITEM = uuid.UUID("0b5f6a4e-7c1d-4e2a-9f3b-8d6c5a4b3e21")
EARLIER = uuid.UUID("1c6a7b5f-8d2e-4f3b-a04c-9e7d6b5c4f32")
OTHER = uuid.UUID("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")
SERVICE = UserInfo(
    id=7,
    username="workqueue-bot",
    name="Workqueue Bot",
    email="bot@example.com",
    commit_email="7-workqueue-bot@users.noreply.gitlab.example.com",
    bot=False,
)
BOT_EMAIL, HUMAN_EMAIL = SERVICE.commit_email or "", "ada@example.com"
OURS = CommitInfo(
    sha="a" * 40,
    title="Sync sources",
    message=stamp("Sync sources", ITEM),
    parent_ids=("b" * 40,),
    author_email=BOT_EMAIL,
    committer_email=BOT_EMAIL,
    web_url="",
)


def test_stamp_appends_the_trailer_as_the_last_line():
    assert stamp("Sync sources\n\nBody\n\n", ITEM) == (
        f"Sync sources\n\nBody\n\nWorkqueue-Item: {ITEM}\n"
    )


def test_the_content_trailer_comes_just_before_the_item_trailer():
    message = stamp("Sync sources", ITEM, "hash-1")
    assert message == f"Sync sources\n\nWorkqueue-Content: hash-1\nWorkqueue-Item: {ITEM}\n"
    assert (stamped_item(message), stamped_content(message)) == (ITEM, "hash-1")


@pytest.mark.parametrize(
    "message",
    [
        stamp("Sync", ITEM),  # no content trailer
        "Sync\n\nWorkqueue-Content: hash-1\n",  # no item trailer after it
        stamp("Sync", ITEM, "hash-1") + "Amended by hand\n",
        f"Workqueue-Item: {ITEM}",
        f"Sync\n\nWorkqueue-Content:\nWorkqueue-Item: {ITEM}",
        None,
    ],
)
def test_no_content_is_read_without_both_trailers_in_place(message):
    assert stamped_content(message) is None


STAMPED_CASES = [
    (stamp("Sync", ITEM), ITEM),
    (stamp("Sync\n\nSigned-off-by: A <a@b>", ITEM), ITEM),
    (f"Sync\n\nWorkqueue-Item: {ITEM}", ITEM),  # GitLab may drop the final newline
    (f"Sync\r\n\r\nWorkqueue-Item: {ITEM}\r\n", ITEM),
    (f"Sync\n\nWorkqueue-Item:   {ITEM}  \n\n  \n", ITEM),  # trailing blank lines
    (f"Sync\n\nWorkqueue-Item: {str(ITEM).upper()}", ITEM),
    # Not stamped, or not as the last line.
    ("Sync", None),
    ("", None),
    (None, None),
    ("\n\n", None),
    (stamp("Sync", ITEM) + "Amended by hand\n", None),
    (f"Workqueue-Item: {ITEM}\n\nSync", None),
    ("Sync\n\nWorkqueue-Item: not-a-uuid", None),
    (f"Sync\n\nWorkqueue-Items: {ITEM}", None),
    (f"Sync\n\nworkqueue-item: {ITEM}", None),
    (f"Sync\n\nWorkqueue-Item {ITEM}", None),
]


@pytest.mark.parametrize(("message", "item_id"), STAMPED_CASES)
def test_stamped_item(message, item_id):
    assert stamped_item(message) == item_id


def test_a_caller_message_cannot_carry_another_items_stamp_past_ours():
    # The caller controls the message; the service's trailer always comes last.
    forged = f"Sync\n\nWorkqueue-Item: {OTHER}\n"
    assert stamped_item(stamp(forged, ITEM)) == ITEM


@pytest.mark.parametrize(
    ("author", "committer", "ours"),
    [
        (BOT_EMAIL, BOT_EMAIL, True),
        ("bot@example.com", BOT_EMAIL, True),  # the primary address counts too
        (BOT_EMAIL.upper(), BOT_EMAIL, True),  # emails compare case-insensitively
        (BOT_EMAIL, HUMAN_EMAIL, False),  # a person amended, rebased or cherry-picked it
        (HUMAN_EMAIL, BOT_EMAIL, False),
        (HUMAN_EMAIL, HUMAN_EMAIL, False),
        ("", "", False),
    ],
)
def test_made_by_needs_both_author_and_committer(author, committer, ours):
    commit = replace(OURS, author_email=author, committer_email=committer)
    assert made_by(commit, SERVICE) is ours


def test_a_user_without_emails_makes_nothing():
    nobody = replace(SERVICE, email=None, commit_email=None)
    assert not made_by(OURS, nobody)


@pytest.mark.parametrize(
    ("commit", "last_pushed", "ours"),
    [
        (OURS, OURS.sha, True),  # the recorded push
        (OURS, None, True),  # a crash lost the record: stamped and made by us
        (OURS, "c" * 40, True),  # a rolled-back newer push of ours
        (replace(OURS, message=stamp("Sync", EARLIER)), None, True),  # an earlier generation
        (replace(OURS, message=stamp("Sync", OTHER)), None, False),  # another branch's item
        (replace(OURS, message="Sync sources"), None, False),  # not stamped (older service)
        (replace(OURS, committer_email=HUMAN_EMAIL), None, False),  # stamped but a person's
        (replace(OURS, author_email=HUMAN_EMAIL, committer_email=HUMAN_EMAIL), None, False),
        # The recorded push is ours whatever its message says.
        (replace(OURS, message="anything", committer_email=HUMAN_EMAIL), OURS.sha, True),
    ],
)
def test_is_own_head(commit, last_pushed, ours):
    owned = is_own_head(
        commit, last_pushed=last_pushed, item_ids={ITEM, EARLIER}, service_user=SERVICE
    )
    assert owned is ours


def _mr(iid: int, **changes: object) -> MergeRequestInfo:
    base = MergeRequestInfo(
        iid=iid,
        web_url="",
        state="opened",
        draft=False,
        sha="a" * 40,
        source_branch="workqueue/sync",
        target_branch="main",
        source_project_id=42,
        target_project_id=42,
        author_id=SERVICE.id,
        author_username=SERVICE.username,
        title="t",
        description="",
        labels=(),
        detailed_merge_status="mergeable",
        head_pipeline_id=None,
        head_pipeline_sha=None,
        head_pipeline_status=None,
        merge_commit_sha=None,
        merge_error=None,
        closed_by_id=None,
    )
    return replace(base, **changes)


HUMAN = {"author_id": 3, "author_username": "ada"}


@pytest.mark.parametrize(
    ("mrs", "own", "foreign"),
    [
        ([], [], []),
        ([_mr(1)], [1], []),
        ([_mr(2), _mr(1)], [2, 1], []),  # newest first, as GitLab lists them
        ([_mr(1, **HUMAN)], [], [1]),
        ([_mr(1, **HUMAN, target_branch="release")], [], [1]),  # a person's, into anywhere
        ([_mr(2), _mr(1, **HUMAN)], [2], [1]),
        ([_mr(1, target_branch="release")], [], []),  # ours, into another target: left alone
        ([_mr(1, source_project_id=99)], [], []),  # a fork's branch of the same name
        ([_mr(1, source_project_id=99, **HUMAN)], [], []),
    ],
)
def test_sort_open_mrs(mrs, own, foreign):
    result = sort_open_mrs(mrs, project_id=42, target_branch="main", service_user=SERVICE)
    assert [mr.iid for mr in result.own] == own
    assert [mr.iid for mr in result.foreign] == foreign


REBASED = replace(OURS, sha="r" * 40, message=stamp("Sync sources", ITEM, "hash-1"))


@pytest.mark.parametrize(
    ("commit", "added", "ours"),
    [
        (REBASED, (REBASED.sha,), True),  # GitLab replayed our one commit as us
        (REBASED, ("p" * 40, REBASED.sha), False),  # a person's commit came along under it
        (REBASED, (), False),  # the head adds nothing to the target
        (replace(REBASED, committer_email=HUMAN_EMAIL), (REBASED.sha,), False),  # a person rebased
        (replace(REBASED, author_email=HUMAN_EMAIL), (REBASED.sha,), False),  # a person's commit
        (replace(REBASED, message="Mine"), (REBASED.sha,), False),  # unstamped
        (replace(REBASED, message=stamp("Sync", OTHER, "hash-1")), (REBASED.sha,), False),
        (replace(REBASED, message=stamp("Sync", ITEM, "hash-0")), (REBASED.sha,), False),  # old
        (replace(REBASED, parent_ids=("b" * 40, "c" * 40)), (REBASED.sha,), False),  # a merge
    ],
    ids=[
        "ours",
        "persons-commit-below",
        "adds-nothing",
        "person-rebased",
        "person-authored",
        "unstamped",
        "other-item",
        "other-content",
        "merge-commit",
    ],
)
def test_a_rebased_head_is_ours_only_as_our_one_commit_on_the_target(commit, added, ours):
    found = is_own_rebase(
        commit, added_commits=added, item_id=ITEM, content_hash="hash-1", service_user=SERVICE
    )
    assert found is ours
