"""Project webhooks as GitLab delivers them: losses, failures and auto-disabling.

A real GitLab does not promise a delivery. It drops some (a Sidekiq job lost
in a restart, a timeout it never retries), and it turns off hooks whose
receiver keeps failing (`WebHooks::AutoDisabling`, GitLab 17.x rules, which
GitLab.com announced in November 2024 as treating 4xx and 5xx alike):

* every non-2xx answer, timeout or connection error is a failure; a 2xx
  answer resets the count;
* from the 4th consecutive failure the hook is *temporarily disabled*: for
  1 minute, doubling with each further failure, at most 24 hours; while
  disabled, events are not sent at all (they are not queued for later);
* at 40 consecutive failures it is *permanently disabled* until someone
  re-enables it (older releases disabled a hook permanently at the 4th 4xx
  and only 5xx backed off).

GitLab does not retry a failed delivery. The simulator follows these rules
for the hooks tests register (`add_project_hook`) and sends through `emit`;
tests can also lose deliveries on purpose (`lose_hooks`: all of them, or a
project's, or some event kinds', optionally only the next N) and disable a
project's hooks by hand (`disable_project_hooks`), as a maintainer or the
auto-disabling does. `send_webhook` stays a plain POST of what a test gives
it: only `emit` goes through these rules.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

FAILURES_BEFORE_DISABLING = 3  # the 4th consecutive failure disables the hook
PERMANENT_FAILURES = 40
FIRST_BACKOFF = timedelta(minutes=1)
MAX_BACKOFF = timedelta(hours=24)

Outcome = Literal["delivered", "failed", "lost", "disabled"]


@dataclass
class ProjectHook:
    """One project webhook: where it posts, and its failure record."""

    id: int
    project_id: int
    url: str
    secret_token: str | None
    recent_failures: int = 0
    disabled_until: datetime | None = None  # temporarily disabled until then
    permanently_disabled: bool = False  # 40 failures, or disabled by hand

    def disabled_at(self, now: datetime) -> bool:
        return self.permanently_disabled or (
            self.disabled_until is not None and now < self.disabled_until
        )

    def record_success(self) -> None:
        self.recent_failures = 0
        self.disabled_until = None

    def record_failure(self, now: datetime) -> None:
        self.recent_failures += 1
        if self.recent_failures >= PERMANENT_FAILURES:
            self.permanently_disabled = True
        elif self.recent_failures > FAILURES_BEFORE_DISABLING:
            doublings = self.recent_failures - FAILURES_BEFORE_DISABLING - 1
            backoff = min(FIRST_BACKOFF * (2**doublings), MAX_BACKOFF)
            self.disabled_until = now + backoff


@dataclass
class HookLoss:
    """Deliveries GitLab loses: of `project_id` (None: any) and of `kinds` (object
    kinds, empty: any), the next `remaining` (None: until stopped)."""

    project_id: int | None
    kinds: frozenset[str]
    remaining: int | None
    lost: int = 0
    active: bool = True

    def takes(self, project_id: int | None, kind: str) -> bool:
        """Whether this rule loses a delivery of that project and kind (and counts it)."""
        if not self.active:
            return False
        if self.project_id is not None and project_id != self.project_id:
            return False
        if self.kinds and kind not in self.kinds:
            return False
        self.lost += 1
        if self.remaining is not None:
            self.remaining -= 1
            self.active = self.remaining > 0
        return True

    def stop(self) -> None:
        self.active = False


@dataclass(frozen=True)
class HookDelivery:
    """What became of one event for one project hook."""

    hook_id: int
    project_id: int | None
    kind: str  # the payload's object_kind
    outcome: Outcome
    status: int | None = None  # the receiver's answer; None when nothing answered
    at: datetime | None = None


@dataclass
class HookDeliveries:
    """The registered hooks, the loss rules and what was delivered (under the state lock)."""

    hooks: dict[int, ProjectHook] = field(default_factory=dict)
    losses: list[HookLoss] = field(default_factory=list)
    log: list[HookDelivery] = field(default_factory=list)
    next_hook_id: int = 1

    def add(self, project_id: int, url: str, secret_token: str | None) -> ProjectHook:
        hook = ProjectHook(self.next_hook_id, project_id, url, secret_token)
        self.next_hook_id += 1
        self.hooks[hook.id] = hook
        return hook

    def of_project(self, project_id: int | None) -> list[ProjectHook]:
        return [hook for hook in self.hooks.values() if hook.project_id == project_id]

    def lose(self, project_id: int | None, kinds: Collection[str], count: int | None) -> HookLoss:
        if count is not None and count < 1:
            raise ValueError("count must be at least 1 (None: until stopped)")
        rule = HookLoss(project_id, frozenset(kinds), count)
        self.losses.append(rule)
        return rule

    def is_lost(self, project_id: int | None, kind: str) -> bool:
        """Whether an active rule loses this delivery (the first matching rule counts it)."""
        return any(rule.takes(project_id, kind) for rule in self.losses)


def payload_project_id(payload: Mapping[str, Any]) -> int | None:
    """The project a payload is about: `project.id`, else the top-level `project_id`
    (Job Hooks of GitLab before 16.0 carry only that)."""
    project = payload.get("project")
    if isinstance(project, Mapping) and isinstance(project.get("id"), int):
        return int(project["id"])
    found = payload.get("project_id")
    return found if isinstance(found, int) else None
