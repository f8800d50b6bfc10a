"""Which commits and MRs on GitLab are the service's own. Pure.

The service force-pushes its branches and edits, merges and closes its MRs;
it must never do that to anyone else's. Before it pushes, `ensure_mr` asks
two questions, answered here from what GitLab reported:

* **Is the branch head ours?** Yes when it is the commit the service last
  recorded for the item (`mr_sha`), or when it is *stamped* for the item and
  *made by* the service's GitLab user:

  - stamped: the last line of its message is the trailer
    `Workqueue-Item: <item id>`, which the service appends to every commit
    message it writes. The caller's message comes before it, so a caller
    cannot make a commit look like another item's; only a line the service
    wrote can be last;
  - made by: its author and committer emails are both addresses of the
    service's user (`GET /user`: `commit_email`, `email`). GitLab writes the
    token's user as both on commits made through the API; a person who
    amends, rebases or cherry-picks the commit becomes its committer.

  The stamp is what survives a crash between the push and recording
  `mr_sha` (the step is rolled back, the commit stays): the retried step
  recognises its own commit instead of taking it for someone else's. The
  author check is what makes a copied message not enough. Neither is
  proof against a person with push access who forges both on purpose; such
  a person can overwrite the branch themselves anyway.

  Earlier generations of the same `(project, source_branch)` count as the
  item (a branch left behind by a cancelled generation is the service's).

  The line before it, `Workqueue-Content: <content hash>`, names the submitted
  content the commit carries: a step retried after such a crash finds that
  content already pushed and does not push it a second time.

* **Is a rebased head ours?** After the service asked GitLab to rebase its
  commit, the new head is the service's when `is_own_rebase` says so: the only
  commit on top of the target, stamped for the item and its content, made by
  the service's user. Since a pusher can forge all of that, its content is
  checked too (`own_content`), as for a head taken for an unrecorded push.

* **Which open MRs of the branch are ours?** Those authored by the service's
  user from the project itself (not from a fork) into the item's target.
  An open MR from the branch by anyone else is a person's work: the service
  does not touch it, and the item fails instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from workqueue.gitlab.models import CommitInfo, MergeRequestInfo, UserInfo

TRAILER = "Workqueue-Item"
CONTENT_TRAILER = "Workqueue-Content"


def stamp(message: str, item_id: uuid.UUID, content_hash: str | None = None) -> str:
    """The commit message the service writes: the caller's, then the trailers (the
    content's, when given, and the item's, always last)."""
    content = f"{CONTENT_TRAILER}: {content_hash}\n" if content_hash else ""
    return f"{message.rstrip()}\n\n{content}{TRAILER}: {item_id}\n"


def stamped_content(message: str | None) -> str | None:
    """The content hash on the line before the item's trailer, if `message` has both."""
    if stamped_item(message) is None:
        return None
    assert message is not None  # noqa: S101 - stamped_item found a trailer in it
    lines = [line for line in message.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    key, separator, value = lines[-2].partition(":")
    if not separator or key.strip() != CONTENT_TRAILER:
        return None
    return value.strip() or None


def stamped_item(message: str | None) -> uuid.UUID | None:
    """The item named by the trailer on the last non-blank line of `message`, if any."""
    if not message:
        return None
    lines = [line for line in message.splitlines() if line.strip()]
    if not lines:
        return None
    key, separator, value = lines[-1].partition(":")
    if not separator or key.strip() != TRAILER:
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        return None


def made_by(commit: CommitInfo, user: UserInfo) -> bool:
    """Whether both the author and the committer of `commit` are `user`."""
    emails = user.commit_emails
    return commit.author_email.casefold() in emails and commit.committer_email.casefold() in emails


def is_own_head(
    commit: CommitInfo,
    *,
    last_pushed: str | None,
    item_ids: Collection[uuid.UUID],
    service_user: UserInfo,
) -> bool:
    """Whether the branch head `commit` is the service's for the item (`item_ids`: its
    id and those of earlier generations of its branch)."""
    if last_pushed is not None and commit.sha == last_pushed:
        return True
    stamped = stamped_item(commit.message)
    return stamped is not None and stamped in item_ids and made_by(commit, service_user)


def is_own_rebase(
    commit: CommitInfo,
    *,
    added_commits: Sequence[str],
    item_id: uuid.UUID,
    content_hash: str,
    service_user: UserInfo,
) -> bool:
    """Whether the new MR head `commit`, after a rebase the service asked GitLab for, is
    that rebase of the service's own commit and nothing else.

    GitLab replays the MR's commits onto the target as the user who asked: the
    service's user is then both author and committer, and the message (with its
    stamp) is kept. So the head counts as the service's only when it is the one
    commit the MR adds to the target (`added_commits`: compare target..head), has
    one parent, carries this item's stamp and this content's hash, and was made
    by the service's user. A person's commit pushed onto the branch before the
    rebase is replayed too and makes a second commit (or the head, unstamped); a
    rebase a person ran has them as committer. Neither is ever taken for ours.
    """
    return (
        tuple(added_commits) == (commit.sha,)
        and len(commit.parent_ids) == 1
        and stamped_item(commit.message) == item_id
        and stamped_content(commit.message) == content_hash
        and made_by(commit, service_user)
    )


@dataclass(frozen=True, slots=True)
class BranchMRs:
    """The open MRs from the item's branch, sorted by whose they are."""

    own: tuple[MergeRequestInfo, ...]  # the service's, into the target: adopt the first
    foreign: tuple[MergeRequestInfo, ...]  # someone else's, from this branch: hands off


def sort_open_mrs(
    merge_requests: Sequence[MergeRequestInfo],
    *,
    project_id: int,
    target_branch: str,
    service_user: UserInfo,
) -> BranchMRs:
    """Split the open MRs GitLab lists for the branch name.

    MRs from another project (a fork's branch of the same name) are about a
    different branch and are neither adopted nor a reason to stop. The
    service's own MRs into another target (retargeted by someone, or from
    an earlier submission) are left alone: they are not the MR for this target.
    """
    own: list[MergeRequestInfo] = []
    foreign: list[MergeRequestInfo] = []
    for merge_request in merge_requests:
        if merge_request.source_project_id != project_id:
            continue
        if merge_request.author_id != service_user.id:
            foreign.append(merge_request)
        elif merge_request.target_branch == target_branch:
            own.append(merge_request)
    return BranchMRs(tuple(own), tuple(foreign))
