"""The accepted `X-Gitlab-Token` values, each with the projects it may speak for.

* `webhooks.secrets[]` in the configuration file: one secret per entry (from
  its `secret_env`), for the projects its globs cover (matched as
  authorization's `projects:`, `auth.projects`).
* `WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET`: comma-separated secrets (for
  rotation) that cover every project (`projects: ["**"]`).

A token is compared with every secret in constant time, and the scope it
carries is the union of the projects of every secret it equals: which secret
matched is never decided by an early exit. A token that equals none has no
scope (401 before the body is read). A scope names its `payer`, the secret
entry (or entries) it came from, whose budget pays the GitLab look-ups its
deliveries cause (`api.webhook_lookup_budget`).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workqueue.api.webhooks.config import WebhooksConfig, secret_from_environment
from workqueue.project_patterns import MATCH_EVERYTHING, path_matches, scope_regexes
from workqueue.settings import Settings

logger = logging.getLogger(__name__)

EVERY_PROJECT = (MATCH_EVERYTHING,)
LEGACY_VARIABLE = "WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET"


@dataclass(frozen=True, slots=True)
class ProjectScope:
    """The projects a presented token may deliver hooks for, and who pays its look-ups."""

    patterns: tuple[str, ...]
    _regexes: tuple[str, ...]
    payer: str = ""

    @classmethod
    def of(cls, patterns: Iterable[str], payer: str = "") -> ProjectScope:
        kept = tuple(dict.fromkeys(patterns))
        return cls(kept, scope_regexes(kept, {}), payer)

    @property
    def every_project(self) -> bool:
        """Whether it covers any project, including a body that names none."""
        return MATCH_EVERYTHING in self.patterns

    def covers(self, project_path: str) -> bool:
        return path_matches(self._regexes, project_path)


@dataclass(frozen=True, slots=True)
class _Secret:
    token: bytes
    scope: ProjectScope


class WebhookSecrets:
    """The secrets and their scopes; never printed."""

    __slots__ = ("_secrets",)

    def __init__(
        self,
        secrets: Iterable[str],
        scoped: Iterable[tuple[str, Sequence[str]]] = (),
    ) -> None:
        """`secrets` cover every project; `scoped` pairs a secret with its project globs.
        Each entry is a payer of its own, named by where it is configured."""
        pairs = [
            (secret, ProjectScope.of(EVERY_PROJECT, f"{LEGACY_VARIABLE}[{index}]"))
            for index, secret in enumerate(secrets)
        ]
        pairs += [
            (secret, ProjectScope.of(projects, f"webhooks.secrets[{index}]"))
            for index, (secret, projects) in enumerate(scoped)
        ]
        self._secrets = tuple(
            _Secret(secret.encode("utf-8"), scope) for secret, scope in pairs if secret
        )

    @classmethod
    def parse(cls, value: str | None) -> WebhookSecrets:
        """Comma-separated secrets for every project (the legacy variable's form)."""
        return cls(_comma_separated(value))

    @classmethod
    def from_settings(
        cls, settings: Settings, config: WebhooksConfig | None = None
    ) -> WebhookSecrets:
        """The legacy variable's secrets and the config file's scoped ones (whose variables
        the config's validation has already checked)."""
        raw = settings.gitlab_webhook_secret
        entries = () if config is None else config.secrets
        secrets = cls(
            _comma_separated(raw.get_secret_value() if raw is not None else None),
            ((secret_from_environment(entry.secret_env), entry.projects) for entry in entries),
        )
        if not secrets:
            logger.warning(
                "WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET is not set and webhooks.secrets is "
                "empty: the webhook receiver refuses every delivery (401)"
            )
        return secrets

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __len__(self) -> int:
        return len(self._secrets)

    def __repr__(self) -> str:
        return f"WebhookSecrets(<{len(self._secrets)} secrets>)"

    def matches(self, token: str | None) -> bool:
        """Whether the token equals any secret (the check made before the body is read)."""
        return self.scope(token) is not None

    def scope(self, token: str | None) -> ProjectScope | None:
        """The projects the token may deliver hooks for; None when it equals no secret.

        Every secret is compared, in constant time, whatever matched before.
        """
        if token is None or not self._secrets:
            return None
        # Header values arrive decoded as latin-1: recover the bytes GitLab sent.
        presented = token.encode("latin-1", "replace")
        matched = [hmac.compare_digest(presented, secret.token) for secret in self._secrets]
        scopes = [
            secret.scope for secret, equal in zip(self._secrets, matched, strict=True) if equal
        ]
        if len(scopes) <= 1:
            return scopes[0] if scopes else None
        # The same token configured for several entries: the union of their projects.
        return ProjectScope.of(
            (pattern for scope in scopes for pattern in scope.patterns),
            "+".join(scope.payer for scope in scopes),
        )


def _comma_separated(value: str | None) -> list[str]:
    """Surrounding whitespace and empty entries are dropped."""
    return [part.strip() for part in (value or "").split(",")]
