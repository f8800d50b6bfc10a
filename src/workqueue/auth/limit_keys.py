"""Who a caller is for `authorization.limits`: its identity, or the claim a rule names.

A GitLab CI `sub` embeds the ref (`project_path:team/app:ref_type:branch:ref:x`),
so counting by `sub` makes every branch of a project a caller of its own. A rule
may say `limit_key: project_path`; every caller it designates is then counted
by that claim's value. Pure functions over a principal and the rules:

- no matching rule sets `limit_key`: `identity:<identity>` (the JWT `sub`,
  the OpenShift user);
- the matching rules name one claim, present in the token as a string or an
  integer: `claim:<claim>=<value>`;
- that claim is missing, empty or of another kind: refused (403), because a
  missing claim must not widen the limit back to one count per subject;
- they name two claims (config validation allows one per `issuer:` value, but
  `k8s` and the cluster's URL can both designate one token): refused (403).

Keys never collide across issuers: the limits count `(issuer_key, limit key)`.
Within one issuer the two prefixes keep identities and claim values apart, and
a claim name has no `=`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workqueue.auth.authorization import rule_matches
from workqueue.auth.config import AuthorizationRule
from workqueue.auth.principal import Principal


@dataclass(frozen=True)
class LimitKey:
    """What the limits count a caller as: `key` stored, `shown_as` in messages."""

    key: str
    shown_as: str


class LimitKeyError(Exception):
    """The caller cannot be counted as its rules say (403); the message is safe to show."""


def limit_key(principal: Principal, rules: Sequence[AuthorizationRule]) -> LimitKey:
    """The key `principal` is counted by; `LimitKeyError` when its rules cannot say."""
    claims = sorted(
        {
            rule.limit_key
            for rule in rules
            if rule.limit_key is not None and rule_matches(principal, rule)
        }
    )
    if not claims:
        return identity_key(principal.identity)
    if len(claims) > 1:
        raise LimitKeyError(
            f"the rules matching {principal.identity} count callers by different claims "
            f"({', '.join(claims)}); ask the operator to set one `limit_key`"
        )
    claim = claims[0]
    value = principal.claims.get(claim)
    # bool before int: `True` is an int in Python, and a flag is no identity.
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise LimitKeyError(
            f"the token of {principal.identity} has no usable `{claim}` claim, "
            "which its authorization rule counts callers by (`limit_key`)"
        )
    return LimitKey(key=f"claim:{claim}={value}", shown_as=f"{claim} {value}")


def identity_key(identity: str) -> LimitKey:
    """The key of a caller counted by its own identity (and of items owned before limit keys)."""
    return LimitKey(key=f"identity:{identity}", shown_as=identity)
