"""What one caller and one project may hold: live items and stored bytes.

The holding half of `authorization.limits` (the rates are counted by the
routes, in transactions of their own). Checked in the transaction that would
go over, before it writes, under advisory locks taken in one order, the
project's and then the caller's (`ownership_repository`): a concurrent
submission on any replica waits for this one to commit and then counts its
item, so no race takes a caller or a project past a limit.

- a new live item (created, or a cancelled one revived): the caller's live
  items, the project's live items, and the caller's stored bytes with the new
  item's added;
- a live item's contents replaced, when they grow: the caller's stored bytes
  with the item's new size instead of its old one.

A caller is `(issuer, limit_key)`: its identity or the claim its rule counts
it by (`auth.limit_keys`). Every type whose callers make it store text sets
`WorkItem.content_bytes` to all of it (for `mr`: contents, title, description,
commit message, labels, paths); finished items count it until retention drops
what it drops, then what is left.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy.orm import Session

from workqueue.queue import ownership_repository


@dataclass(frozen=True)
class Owner:
    """Who the limits count: `shown_as` names it in refusals."""

    issuer: str
    limit_key: str
    shown_as: str


@dataclass(frozen=True)
class HoldingLimits:
    max_live_items_per_caller: int
    max_live_items_per_project: int
    max_stored_bytes_per_caller: int


class HoldingLimitError(Exception):
    """Holding more would go over `limit_name` (HTTP 429); nothing was written.

    The message starts with `<limit_name> (<limit>) reached for <whom>`.
    """

    def __init__(self, limit_name: str, limit: int, whom: str, held: str, advice: str) -> None:
        super().__init__(f"{limit_name} ({limit}) reached for {whom}: {held}; {advice}")
        self.limit_name = limit_name


_LET_FINISH = "let some finish or cancel them first"
_DROP_CONTENTS = (
    "finished items count until retention.content_days drops their contents, "
    "descriptions and commit messages"
)


def identity_owner(issuer: str, identity: str) -> Owner:
    """An owner counted by its own identity (no rule names a `limit_key` for it)."""
    return Owner(issuer=issuer, limit_key=f"identity:{identity}", shown_as=identity)


@dataclass(frozen=True)
class Submitter:
    """Who submits an item: ownership compares both parts (subjects are unique per issuer
    only); `owner` is what `authorization.limits` counts it as (None: its own identity)."""

    issuer: str
    identity: str
    owner: Owner | None = None

    @property
    def counted_as(self) -> Owner:
        return self.owner or identity_owner(self.issuer, self.identity)


def owner_of_key(issuer: str, limit_key: str) -> Owner:
    """The owner of a stored limit key, named as `auth.limit_keys` names it
    (`identity:<identity>` or `claim:<claim>=<value>`)."""
    kind, _, rest = limit_key.partition(":")
    shown = rest.replace("=", " ", 1) if kind == "claim" else rest
    return Owner(issuer=issuer, limit_key=limit_key, shown_as=shown)


def check_new_live_item(
    session: Session,
    owner: Owner,
    project_path: str | None,
    limits: HoldingLimits,
    *,
    content_bytes: int,
    other_than: uuid.UUID | None = None,
) -> None:
    """`HoldingLimitError` unless `owner` may hold one more live item in `project_path`,
    with `content_bytes` more stored bytes (0: nothing new stored, no byte check).
    `other_than`: an item counted as that new one (an item being revived), left out of
    every count."""
    if project_path is not None:
        ownership_repository.lock_project(session, project_path)
    ownership_repository.lock_caller(session, owner.issuer, owner.limit_key)
    held = ownership_repository.live_item_count(
        session, owner.issuer, owner.limit_key, other_than=other_than
    )
    if held >= limits.max_live_items_per_caller:
        raise HoldingLimitError(
            "max_live_items_per_caller",
            limits.max_live_items_per_caller,
            owner.shown_as,
            f"{held} live items held",
            _LET_FINISH,
        )
    if project_path is not None:
        in_project = ownership_repository.project_live_item_count(
            session, project_path, other_than=other_than
        )
        if in_project >= limits.max_live_items_per_project:
            raise HoldingLimitError(
                "max_live_items_per_project",
                limits.max_live_items_per_project,
                project_path,
                f"{in_project} live items in the project",
                _LET_FINISH,
            )
    if content_bytes > 0:
        _check_stored_bytes(session, owner, limits, content_bytes, other_than=other_than)


def check_content_growth(
    session: Session,
    owner: Owner,
    limits: HoldingLimits,
    *,
    item_id: uuid.UUID,
    old_bytes: int,
    new_bytes: int,
) -> None:
    """`HoldingLimitError` when the item holding `new_bytes` instead of `old_bytes` takes
    `owner` over its stored bytes. Shrinking is always allowed (even over the limit)."""
    if new_bytes <= old_bytes:
        return
    ownership_repository.lock_caller(session, owner.issuer, owner.limit_key)
    _check_stored_bytes(session, owner, limits, new_bytes, other_than=item_id)


def _check_stored_bytes(
    session: Session,
    owner: Owner,
    limits: HoldingLimits,
    content_bytes: int,
    *,
    other_than: uuid.UUID | None,
) -> None:
    stored = ownership_repository.stored_bytes(
        session, owner.issuer, owner.limit_key, other_than=other_than
    )
    if stored + content_bytes > limits.max_stored_bytes_per_caller:
        raise HoldingLimitError(
            "max_stored_bytes_per_caller",
            limits.max_stored_bytes_per_caller,
            owner.shown_as,
            f"{stored} bytes stored, {content_bytes} more asked",
            _DROP_CONTENTS,
        )
