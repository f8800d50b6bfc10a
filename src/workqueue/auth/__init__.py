"""Authentication and authorization, independent of the HTTP framework.

The HTTP layer passes the `Authorization` header value to
`Authenticator.authenticate` (AuthenticationError → 401) and asks the pure
functions of `authorization` whether the principal holds a permission on
an item type (no → 403).
"""

from workqueue.auth.authenticator import Authenticator, bearer_token
from workqueue.auth.authorization import (
    ALL_ITEM_TYPES,
    NO_ITEM_TYPES,
    ItemTypeScope,
    granted_permissions,
    is_allowed,
    permission_scope,
    readable_item_types,
    rule_matches,
)
from workqueue.auth.config import (
    K8S_ISSUER,
    PERMISSIONS,
    AuthorizationConfig,
    AuthorizationRule,
    Permission,
)
from workqueue.auth.errors import AuthenticationError, IssuerUnavailableError
from workqueue.auth.kubernetes import ClusterEnvironment
from workqueue.auth.principal import Principal, PrincipalKind

__all__ = [
    "ALL_ITEM_TYPES",
    "K8S_ISSUER",
    "NO_ITEM_TYPES",
    "PERMISSIONS",
    "AuthenticationError",
    "Authenticator",
    "AuthorizationConfig",
    "AuthorizationRule",
    "ClusterEnvironment",
    "IssuerUnavailableError",
    "ItemTypeScope",
    "Permission",
    "Principal",
    "PrincipalKind",
    "bearer_token",
    "granted_permissions",
    "is_allowed",
    "permission_scope",
    "readable_item_types",
    "rule_matches",
]
