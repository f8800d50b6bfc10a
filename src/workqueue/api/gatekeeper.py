"""The routes' gatekeeper built from the config's authorization rules (auth/ does the work)."""

from __future__ import annotations

from collections.abc import Sequence

from workqueue.api.caller_state import Caller
from workqueue.api.deps import CallerAuthenticationError
from workqueue.auth.authenticator import Authenticator
from workqueue.auth.authorization import (
    Grant,
    grants,
    is_allowed,
    is_allowed_on_project,
    readable_item_types,
)
from workqueue.auth.config import AuthorizationRule, CallerLimits, Permission
from workqueue.auth.errors import AuthenticationError, IssuerUnavailableError
from workqueue.auth.limit_keys import LimitKey, limit_key
from workqueue.auth.principal import Principal
from workqueue.config import ServiceConfig
from workqueue.settings import Settings


class RuleGatekeeper:
    """Bearer authentication plus the Vault-style rules of the config file."""

    def __init__(
        self,
        authenticator: Authenticator,
        rules: Sequence[AuthorizationRule],
        limits: CallerLimits | None = None,
    ) -> None:
        self._authenticator = authenticator
        self._rules = list(rules)
        self._limits = limits or CallerLimits()

    @property
    def limits(self) -> CallerLimits:
        return self._limits

    def limit_key(self, caller: Caller) -> LimitKey:
        return limit_key(_principal(caller), self._rules)

    def authenticate(self, authorization: str | None, *, offline: bool = False) -> Principal:
        try:
            return self._authenticator.authenticate(authorization, offline=offline)
        except IssuerUnavailableError as error:
            raise CallerAuthenticationError(str(error), unverifiable=True) from None
        except AuthenticationError as error:
            raise CallerAuthenticationError(str(error)) from None

    def allowed(
        self, caller: Caller, permission: Permission, item_type: str, project_path: str | None
    ) -> bool:
        return is_allowed_on_project(
            _principal(caller), self._rules, permission, item_type, project_path
        )

    def may_use(self, caller: Caller, permission: Permission, item_type: str) -> bool:
        return is_allowed(_principal(caller), self._rules, permission, item_type)

    def visibility(self, caller: Caller, permission: Permission) -> tuple[Grant, ...]:
        return grants(_principal(caller), self._rules, permission)

    def readable_types(self, caller: Caller) -> set[str] | None:
        scope = readable_item_types(_principal(caller), self._rules)
        if scope.all_types:
            return None  # no filter: also types other replicas handle (shared database)
        return set(scope.item_types)

    def close(self) -> None:
        self._authenticator.close()


def _principal(caller: Caller) -> Principal:
    if not isinstance(caller, Principal):  # pragma: no cover - only this gatekeeper makes callers
        raise TypeError("caller was not authenticated by this gatekeeper")
    return caller


def build_gatekeeper(settings: Settings, config: ServiceConfig) -> RuleGatekeeper:
    authenticator = Authenticator(
        config.authorization,
        local_user=settings.local_auth_user,
        openshift_api_url=settings.openshift_api_url,
    )
    return RuleGatekeeper(authenticator, config.authorization.rules, config.authorization.limits)
