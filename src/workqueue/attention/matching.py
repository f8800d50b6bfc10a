"""Whether an item matches a queue's rule, and what the rule saw of it (pure)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ItemFacts:
    """What rules can look at: the item's columns, dimensions and detail columns."""

    id: uuid.UUID
    item_type: str
    phase: str
    project: str | None
    generation: int
    # dimension name -> statuses of its variant rows ("true"/"false")
    dimensions: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # the type's detail columns, by name (only those some rule refers to)
    details: Mapping[str, Any] = field(default_factory=dict)


def detail_fields(match: Mapping[str, Sequence[str]]) -> set[str]:
    """Top-level detail columns a rule refers to (`details.merge_blocker.code` → merge_blocker)."""
    return {
        key.split(".")[1] for key in match if key.startswith("details.") and key.count(".") >= 1
    }


def matches(match: Mapping[str, Sequence[str]], facts: ItemFacts) -> bool:
    """AND over the rule's keys; a key matches when the item's value is any of its values.

    An empty rule matches nothing: a queue only filled by hand.
    """
    if not match:
        return False
    return all(_value_of(key, facts) in set(values) for key, values in match.items())


def fingerprint(match: Mapping[str, Sequence[str]], facts: ItemFacts) -> str:
    """A digest of everything this rule looks at, plus the generation.

    Stored when a person removes a member: the item has "changed again" (and
    may be added back) once the digest differs.
    """
    seen = {key: _value_of(key, facts) for key in sorted(match)}
    seen["generation"] = str(facts.generation)
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()


def _value_of(key: str, facts: ItemFacts) -> str | None:
    plain = {"item_type": facts.item_type, "phase": facts.phase, "project": facts.project}
    if key in plain:
        return plain[key]
    kind, _, rest = key.partition(".")
    if kind == "dimension":
        statuses = facts.dimensions.get(rest)
        # An absent row means "needed" (true); any variant still needed counts.
        if not statuses or "true" in statuses:
            return "true"
        return "false"
    if kind == "details":
        value: Any = facts.details
        for part in rest.split("."):
            if not isinstance(value, Mapping):
                return None
            value = value.get(part)
        return _as_text(value)
    return None


def _as_text(value: Any) -> str | None:
    if value is None or isinstance(value, Mapping | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
