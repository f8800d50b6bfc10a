"""The `attention:` section of the config file: which queues exist and what they match."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from workqueue.queue.models import Phase

QUEUE_NAME_PATTERN = r"^[a-z0-9-]{1,63}$"
PLAIN_KEYS = frozenset({"item_type", "phase", "project"})
_FIELD_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

MatchValue = Annotated[list[str], Field(min_length=1)]


def _as_strings(value: Any) -> Any:
    # YAML reads `true` and `3` as non-strings; a rule compares text.
    values = value if isinstance(value, list) else [value]
    converted = []
    for one in values:
        if isinstance(one, bool):
            converted.append("true" if one else "false")
        elif isinstance(one, int | float | str):
            converted.append(str(one))
        else:
            raise TypeError("match values are strings or lists of strings")
    return converted


class QueueRule(BaseModel):
    """One attention queue and the rule that keeps its membership."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=QUEUE_NAME_PATTERN)
    description: str = Field("", max_length=1024)
    match: dict[str, MatchValue] = Field(
        default_factory=dict,
        description="AND over keys; a list matches any of its values; {} adds nothing",
    )
    prune: bool = Field(default=False, description="remove members once they stop matching")
    enabled: bool = Field(default=True, description="false: the rule adds and prunes nothing")

    @field_validator("match", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {key: _as_strings(one) for key, one in value.items()}

    @field_validator("match")
    @classmethod
    def _check_keys(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for key, values in value.items():
            kind, _, rest = key.partition(".")
            if key in PLAIN_KEYS:
                if key == "phase":
                    unknown = set(values) - {phase.value for phase in Phase}
                    if unknown:
                        raise ValueError(f"match.phase: unknown phases {sorted(unknown)}")
            elif kind == "dimension" and _FIELD_PATH.match(rest) and "." not in rest:
                if set(values) - {"true", "false"}:
                    raise ValueError(f"match.{key}: values are 'true' or 'false'")
            elif kind == "details" and _FIELD_PATH.match(rest):
                pass
            else:
                raise ValueError(
                    f"match key {key!r}: use item_type, phase, project, "
                    "dimension.<name> or details.<field>[.<field>...]"
                )
        return value


def default_queues() -> list[QueueRule]:
    """The queues a service without an `attention:` section has."""
    return [
        QueueRule(name="needs-human", description="Failed items", match={"phase": ["failed"]}),
        QueueRule(
            name="needs-review",
            description="Merge requests waiting for a person's review",
            match={
                "item_type": ["mr"],
                "details.merge_blocker.code": [
                    "not_approved",
                    "requested_changes",
                    "discussions_not_resolved",
                ],
            },
        ),
        QueueRule(
            name="conflicts",
            description="Merge requests that cannot merge without a person",
            match={
                "item_type": ["mr"],
                # merge_refused: GitLab keeps refusing (retried with backoff) or dropped
                # the MR from its merge train twice; a person finds out why.
                "details.merge_blocker.code": [
                    "conflict",
                    "need_rebase",
                    "foreign_commits",
                    "merge_refused",
                ],
            },
        ),
        QueueRule(
            name="held",
            description="Merge requests a person holds on purpose: auto-merge off, or a draft",
            match={
                "item_type": ["mr"],
                "phase": ["active"],
                "details.merge_blocker.code": ["auto_merge_disabled", "draft"],
            },
            prune=True,
        ),
        QueueRule(
            name="red-ci",
            description="Merge requests whose pipeline failed and that no CI retry rule took",
            match={
                "item_type": ["mr"],
                "phase": ["active"],
                "details.merge_blocker.code": ["pipeline_failed"],
            },
            prune=True,
        ),
        QueueRule(
            name="red-checks",
            description="Merged MRs an external check failed after the merge (red, or "
            "no green result in time)",
            match={
                "item_type": ["mr"],
                "phase": ["failed"],
                "details.post_merge.outcome": ["failed"],
            },
            # A retried item waits for its checks again: it leaves the queue.
            prune=True,
        ),
        QueueRule(
            name="red-trunk",
            description="Failed trunk validations",
            match={"item_type": ["trunk"], "phase": ["failed"]},
        ),
    ]


class AttentionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    queues: list[QueueRule] = Field(default_factory=default_queues)

    @field_validator("queues")
    @classmethod
    def _unique_names(cls, value: list[QueueRule]) -> list[QueueRule]:
        names = [queue.name for queue in value]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"queue names must be unique: {duplicates}")
        return value
