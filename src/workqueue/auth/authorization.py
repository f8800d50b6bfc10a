"""Authorization: which permissions on which item types the rules grant a principal.

Pure functions over a `Principal` and the configured rules, so every case is
a row in a table-driven test. The rules (seed 003, DDR-21/23):

- a `groups` rule matches a principal holding any of its groups;
- an `issuer` rule matches a JWT principal from that issuer (`k8s` being the
  cluster's discovered issuer) whose claims all match (`claims.py`);
- permissions are the union over every matching rule, each scoped to the
  rule's `item_types` (or to all types when it has none) and to its
  `projects` (or to all projects when it has none; config validation makes
  rules granting submit, retry or report list them);
- nothing matching means nothing granted: even `read` needs a rule.

Item-type scopes alone (`ItemTypeScope`) answer "may this caller use the
endpoint at all"; `Grant`s answer "on which (type, project) pairs", per rule,
because the union of two rules is not the product of their unions (read on
`mr` in `a/**` plus read on `trunk` everywhere does not allow `mr` in `b/x`).

The development-only local user (`WORKQUEUE_SERVICE_LOCAL_AUTH_USER`) is
granted everything. It exists so `make run` works without an identity
provider, it has no groups or claims a rule could name, and it is only ever
produced when an operator set that variable (which logs a loud warning).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workqueue.auth.claims import claims_match
from workqueue.auth.config import PERMISSIONS, AuthorizationRule, Permission
from workqueue.auth.principal import Principal
from workqueue.project_patterns import path_matches, scope_regexes


@dataclass(frozen=True)
class ItemTypeScope:
    """The item types a permission covers: all of them, or a (possibly empty) set."""

    all_types: bool
    item_types: frozenset[str] = frozenset()

    def allows(self, item_type: str) -> bool:
        return self.all_types or item_type in self.item_types

    @property
    def is_empty(self) -> bool:
        return not self.all_types and not self.item_types

    def union(self, other: ItemTypeScope) -> ItemTypeScope:
        if self.all_types or other.all_types:
            return ALL_ITEM_TYPES
        return ItemTypeScope(all_types=False, item_types=self.item_types | other.item_types)

    @classmethod
    def of(cls, item_types: Iterable[str] | None) -> ItemTypeScope:
        """The scope of a rule: None (no `item_types` key) means every type."""
        if item_types is None:
            return ALL_ITEM_TYPES
        return cls(all_types=False, item_types=frozenset(item_types))


ALL_ITEM_TYPES = ItemTypeScope(all_types=True)
NO_ITEM_TYPES = ItemTypeScope(all_types=False)


def rule_matches(principal: Principal, rule: AuthorizationRule) -> bool:
    """Whether `rule` designates `principal` (permissions aside)."""
    if rule.groups is not None:
        return not principal.groups.isdisjoint(rule.groups)
    if principal.kind != "jwt" or rule.issuer not in principal.configured_issuers:
        return False
    # The config validator guarantees issuer rules carry claims (with `aud`);
    # `or {}` only satisfies the type checker and would match nothing useful.
    return claims_match(rule.claims or {}, principal.claims)


def granted_permissions(
    principal: Principal, rules: Sequence[AuthorizationRule]
) -> dict[Permission, ItemTypeScope]:
    """The granted permissions, each with the item types it covers.

    A permission that no matching rule grants is absent from the result.
    """
    if principal.kind == "local":
        return dict.fromkeys(PERMISSIONS, ALL_ITEM_TYPES)
    granted: dict[Permission, ItemTypeScope] = {}
    for rule in rules:
        if not rule_matches(principal, rule):
            continue
        if rule.projects is not None and not scope_regexes(rule.projects, principal.claims):
            continue  # its project patterns need claims this token does not carry
        scope = ItemTypeScope.of(rule.item_types)
        for permission in rule.permissions:
            granted[permission] = granted.get(permission, NO_ITEM_TYPES).union(scope)
    return granted


def permission_scope(
    principal: Principal, rules: Sequence[AuthorizationRule], permission: Permission
) -> ItemTypeScope:
    """The item types on which `principal` holds `permission` (possibly none)."""
    return granted_permissions(principal, rules).get(permission, NO_ITEM_TYPES)


def is_allowed(
    principal: Principal,
    rules: Sequence[AuthorizationRule],
    permission: Permission,
    item_type: str,
) -> bool:
    """Whether `principal` may use `permission` on items of `item_type` (else HTTP 403)."""
    return permission_scope(principal, rules, permission).allows(item_type)


def readable_item_types(principal: Principal, rules: Sequence[AuthorizationRule]) -> ItemTypeScope:
    """What a list endpoint may show: `ALL_ITEM_TYPES` needs no filter.

    A scope rather than a set of known types, because in a shared database
    (DDR-19) items of types this replica does not handle are still listed to
    callers whose rules have no `item_types` restriction.
    """
    return permission_scope(principal, rules, "read")


@dataclass(frozen=True)
class Grant:
    """One matching rule's reach for one permission.

    `item_types` None: every type. `project_regexes` None: every project
    (also items without a project); otherwise anchored expressions over the
    project path (see `projects.py`), possibly none at all when every
    pattern's placeholder claim was missing.
    """

    item_types: frozenset[str] | None
    project_regexes: tuple[str, ...] | None

    def allows(self, item_type: str, project_path: str | None) -> bool:
        if self.item_types is not None and item_type not in self.item_types:
            return False
        if self.project_regexes is None:
            return True
        return project_path is not None and path_matches(self.project_regexes, project_path)


EVERYTHING = Grant(item_types=None, project_regexes=None)


def grants(
    principal: Principal, rules: Sequence[AuthorizationRule], permission: Permission
) -> tuple[Grant, ...]:
    """What each rule that designates `principal` grants for `permission` (empty: nothing)."""
    if principal.kind == "local":
        return (EVERYTHING,)
    found: list[Grant] = []
    for rule in rules:
        if permission not in rule.permissions or not rule_matches(principal, rule):
            continue
        item_types = None if rule.item_types is None else frozenset(rule.item_types)
        regexes = None if rule.projects is None else scope_regexes(rule.projects, principal.claims)
        if regexes == ():
            continue  # every pattern needed a claim the token does not carry
        found.append(Grant(item_types=item_types, project_regexes=regexes))
    return tuple(found)


def is_allowed_on_project(
    principal: Principal,
    rules: Sequence[AuthorizationRule],
    permission: Permission,
    item_type: str,
    project_path: str | None,
) -> bool:
    """Whether some rule grants `permission` on `item_type` items of this project."""
    return any(
        grant.allows(item_type, project_path) for grant in grants(principal, rules, permission)
    )
