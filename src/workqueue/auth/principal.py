"""Who is calling: the result of authentication, the input of authorization."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

PrincipalKind = Literal["jwt", "openshift", "local"]

_NO_CLAIMS: Mapping[str, Any] = MappingProxyType({})


def _no_claims() -> Mapping[str, Any]:
    return _NO_CLAIMS


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    `identity` is what the service records as `caller_identity`: the JWT
    `sub`, the OpenShift user name, or the development-only local user.
    """

    identity: str
    kind: PrincipalKind
    # The token's verified `iss` (for `issuer: k8s`, the cluster's real
    # issuer URL); None for OpenShift and local principals.
    issuer: str | None = None
    # Verified JWT payload; empty for other kinds. Excluded from hashing
    # because mappings are not hashable.
    claims: Mapping[str, Any] = field(default_factory=_no_claims, hash=False)
    # OpenShift group membership from `users/~`; empty for other kinds.
    groups: frozenset[str] = frozenset()
    # The `issuer:` values of the config that designate `issuer`: the URL
    # itself and/or `k8s` when it is the cluster's discovered issuer. Rules
    # are matched against these, so authorization stays a pure function.
    configured_issuers: frozenset[str] = frozenset()

    @property
    def issuer_key(self) -> str:
        """Where `identity` comes from; (issuer_key, identity) names one caller.

        Subjects are only unique per issuer: `bot` from a GitLab token and
        `bot` from a cluster token are different callers and must never own
        each other's items. OpenShift users and the local user have their
        own namespaces.
        """
        if self.kind == "jwt" and self.issuer is not None:
            return self.issuer
        return self.kind
