"""Claim comparison in the style of Vault's `bound_claims` (DDR-21).

Values are compared exactly, as strings: a rule written `project_id: 42`
matches GitLab's string claim `"42"` and `ref_protected: true` matches
`"true"`, but `ref: main` does not match a token for the branch `Main` (git
refs, project paths and subjects are case-sensitive, so folding case would
grant one name's permissions to another). Lists on either side are sets of
alternatives: a rule list means "any of these", a token list (`aud` of a
Kubernetes token, `groups`) means "the token has each of these".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def claim_string(value: Any) -> str | None:
    """The comparable form of one scalar claim value, or None if it cannot match.

    Floats, nulls and objects are not comparable: their string forms (`1.0`,
    `None`, `{...}`) depend on the serializer, not on what the author meant.
    """
    # bool before int: `True` is an int in Python but must read "true".
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    return None


def claim_strings(value: Any) -> frozenset[str]:
    """All comparable forms of a scalar or list claim value."""
    items = value if isinstance(value, list | tuple) else [value]
    return frozenset(
        comparable for comparable in map(claim_string, items) if comparable is not None
    )


def claims_match(required: Mapping[str, Any], claims: Mapping[str, Any]) -> bool:
    """Every required claim is present and shares at least one value with the token."""
    for name, accepted in required.items():
        if name not in claims:
            return False
        if claim_strings(accepted).isdisjoint(claim_strings(claims[name])):
            return False
    return True
