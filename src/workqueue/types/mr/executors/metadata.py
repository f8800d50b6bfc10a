"""People's edits win: what an update of the service's MR may change. Pure.

The service remembers what it last set on the MR (`SetMetadata`, stored as
digests in `mr_details.mr_metadata_set`) and changes a field only while GitLab
still shows that value:

| field | GitLab shows what the service set | GitLab shows something else |
| --- | --- | --- |
| title, without its draft prefix | set to the submitted title | kept (a person's) |
| draft (the title's prefix) | follows the submitted title | kept: a person's draft, or ready |
| description | set to the submitted one | kept |

| label | what the update does |
| --- | --- |
| named by the submission, missing, not set before | added |
| named by the submission and set before, missing | left missing: a person removed it |
| set before, not named now, present | removed |
| never set by the service | never touched |

A label is remembered as the service's (*set*) only when the service added it,
or set it before and its submission still names it: a label a person had put on
the MR before a submission named it stays the person's, so dropping it from a
later submission never takes a person's hold (`do-not-merge`) off.

Nothing remembered (an MR opened before migration 0017): the title, draft and
description are taken as the service's, and no label is removed (the labels
already on it are never taken for the service's).

A kept title keeps its draft prefix as the person wrote it; a kept draft on
the service's own title is written as the person's prefix plus the new title.
What is remembered after a write is what GitLab answered, so its own
normalisation (stripped titles, say) never looks like a person's edit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

# GitLab's draft prefixes (`MergeRequest::DRAFT_REGEX`), repeated ones taken together,
# so what is left never starts with one.
_DRAFT_PREFIX = re.compile(r"^(?:(?:\[draft\]|\(draft\)|draft:)\s*)+", re.IGNORECASE)


def split_draft(title: str) -> tuple[str, str]:
    """(draft prefix, the rest): ("Draft: ", "Sync") for "Draft: Sync"; ("", t) otherwise."""
    match = _DRAFT_PREFIX.match(title)
    if match is None:
        return "", title
    return match.group(0), title[match.end() :]


def digest(text: str) -> str:
    # surrogatepass: GitLab may hand back anything; a digest must never raise.
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class MRMetadata:
    """A title, description and labels: what GitLab shows, or what a submission wants."""

    title: str
    description: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class SetMetadata:
    """What the service last set on the MR, as digests (never a second copy of the text)."""

    title: str  # digest of the title without its draft prefix
    draft: bool
    description: str  # digest
    labels: frozenset[str]  # digests of the labels it set and its last submission named

    def stored(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "draft": self.draft,
            "description": self.description,
            "labels": sorted(self.labels),
        }

    @classmethod
    def from_stored(cls, value: Mapping[str, Any] | None) -> SetMetadata | None:
        if value is None:
            return None
        return cls(
            title=str(value["title"]),
            draft=bool(value["draft"]),
            description=str(value["description"]),
            labels=frozenset(str(label) for label in value["labels"]),
        )

    @classmethod
    def of(cls, shown: MRMetadata, named_labels: Collection[str]) -> SetMetadata:
        """What the service set, as GitLab shows it after the write."""
        prefix, rest = split_draft(shown.title)
        return cls(
            title=digest(rest),
            draft=bool(prefix),
            description=digest(shown.description),
            labels=frozenset(digest(label) for label in named_labels),
        )


@dataclass(frozen=True)
class KeptEdit:
    """A field the service would have changed but leaves as a person made it."""

    field: str  # title | draft | description | labels
    message: str
    added_by_people: tuple[str, ...] = ()  # labels only
    removed_by_people: tuple[str, ...] = ()  # labels only


@dataclass(frozen=True)
class MetadataUpdate:
    """The `update_merge_request` fields to send (none: no call) and the edits kept."""

    changes: dict[str, str | list[str]]
    kept: tuple[KeptEdit, ...]
    # Fields the service still holds: remembered anew from GitLab's answer.
    title_ours: bool
    draft_ours: bool
    description_ours: bool
    # Digests of the labels the service holds after `changes`: those it adds now and
    # those it set before that the submission still names (never a person's).
    labels_ours: frozenset[str] = frozenset()

    def remembered(self, before: SetMetadata | None, answer: MRMetadata) -> SetMetadata:
        """What the service has set once `changes` are applied and GitLab `answer`ed."""
        now = SetMetadata.of(answer, ())
        if before is None:
            return dataclasses.replace(now, labels=self.labels_ours)
        return SetMetadata(
            title=now.title if self.title_ours else before.title,
            draft=now.draft if self.draft_ours else before.draft,
            description=now.description if self.description_ours else before.description,
            labels=self.labels_ours,
        )


def plan_update(
    set_before: SetMetadata | None, shown: MRMetadata, wanted: MRMetadata
) -> MetadataUpdate:
    """What to change on an MR showing `shown` so it carries `wanted` where no person
    changed what the service had set (`set_before`)."""
    shown_prefix, shown_rest = split_draft(shown.title)
    wanted_prefix, wanted_rest = split_draft(wanted.title)
    title_ours = set_before is None or digest(shown_rest) == set_before.title
    draft_ours = set_before is None or bool(shown_prefix) == set_before.draft
    description_ours = set_before is None or digest(shown.description) == set_before.description
    kept: list[KeptEdit] = []
    rest = wanted_rest if title_ours else shown_rest
    if not title_ours and shown_rest != wanted_rest:
        kept.append(KeptEdit("title", "a person changed the MR title; the service keeps it"))
    prefix = wanted_prefix if draft_ours else shown_prefix
    if not draft_ours and bool(shown_prefix) != bool(wanted_prefix):
        state = "a draft" if shown_prefix else "ready"
        kept.append(KeptEdit("draft", f"a person marked the MR {state}; the service keeps it"))
    changes: dict[str, str | list[str]] = {}
    if prefix + rest != shown.title:
        changes["title"] = prefix + rest
    if description_ours:
        if shown.description != wanted.description:
            changes["description"] = wanted.description
    elif shown.description != wanted.description:
        kept.append(
            KeptEdit("description", "a person changed the MR description; the service keeps it")
        )
    labels, kept_labels = _label_changes(set_before, shown.labels, wanted.labels)
    changes.update(labels)
    named_before = set_before.labels if set_before is not None else frozenset()
    added = labels.get("add_labels", [])
    labels_ours = frozenset(digest(label) for label in added) | frozenset(
        digest(label) for label in wanted.labels if digest(label) in named_before
    )
    if kept_labels is not None:
        kept.append(kept_labels)
    return MetadataUpdate(
        changes=changes,
        kept=tuple(kept),
        title_ours=title_ours,
        draft_ours=draft_ours,
        description_ours=description_ours,
        labels_ours=labels_ours,
    )


def _label_changes(
    set_before: SetMetadata | None, shown: Collection[str], wanted: Collection[str]
) -> tuple[dict[str, str | list[str]], KeptEdit | None]:
    named_before = set_before.labels if set_before is not None else frozenset()
    shown_set, wanted_set = set(shown), set(wanted)
    # Named before and gone now: a person removed it, and it stays removed.
    removed_by_people = sorted(
        label for label in wanted_set - shown_set if digest(label) in named_before
    )
    add = sorted(wanted_set - shown_set - set(removed_by_people))
    remove = sorted(label for label in shown_set - wanted_set if digest(label) in named_before)
    added_by_people = sorted(shown_set - wanted_set - set(remove))
    changes: dict[str, str | list[str]] = {}
    if add:
        changes["add_labels"] = add
    if remove:
        changes["remove_labels"] = remove
    kept = None
    if added_by_people or removed_by_people:
        kept = KeptEdit(
            "labels",
            "people changed the MR's labels; the service keeps their labels",
            added_by_people=tuple(added_by_people),
            removed_by_people=tuple(removed_by_people),
        )
    return changes, kept
