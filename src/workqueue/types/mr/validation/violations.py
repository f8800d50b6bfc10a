"""The result of a policy check: where a submission is wrong, and how."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# FastAPI-style location: starts at "body", then field names and list indexes.
Loc = tuple[str | int, ...]


class ViolationKind(StrEnum):
    """Machine-readable reasons; they become the `type` of a 422 error entry."""

    PATH_NOT_CANONICAL = "path_not_canonical"
    PATH_INVALID_CHARACTER = "path_invalid_character"
    PATH_GIT_COMPONENT = "path_git_component"
    PATH_BLOCKED = "path_blocked"
    DUPLICATE_PATH = "duplicate_path"
    INVALID_MOVE = "invalid_move"
    INVALID_BASE64 = "invalid_base64"
    BINARY_CONTENT = "binary_content"
    SECRET = "secret"  # noqa: S105 - the name of a violation kind, not a password
    INVALID_CHARACTER = "invalid_character"
    INVALID_UNICODE = "invalid_unicode"
    INVALID_BRANCH = "invalid_branch"
    SAME_BRANCH = "same_branch"
    TARGET_NOT_ALLOWED = "target_not_allowed"
    BRANCH_OUTSIDE_PREFIX = "branch_outside_prefix"
    QUICK_ACTION = "quick_action"
    CROSS_PROJECT_REFERENCE = "cross_project_reference"
    MENTION = "mention"
    INVALID_PROJECT = "invalid_project"
    INVALID_LABEL = "invalid_label"
    TOO_MANY_LABELS = "too_many_labels"
    BLANK = "blank"
    TOO_LONG = "too_long"
    TOO_LARGE = "too_large"
    TOO_MANY_ACTIONS = "too_many_actions"
    NO_ACTIONS = "no_actions"


@dataclass(frozen=True, slots=True)
class Violation:
    """One reason to refuse a submission, pointing at the offending field."""

    loc: Loc
    message: str
    kind: str

    def as_error(self) -> dict[str, object]:
        """The entry of a FastAPI-shaped 422 `detail` list."""
        return {"loc": list(self.loc), "msg": self.message, "type": str(self.kind)}
