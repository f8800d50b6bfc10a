"""Simulator helpers for project webhooks delivered as GitLab delivers them (`hook_delivery`):
register a hook, emit events to it, lose deliveries, disable hooks."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import httpx

from workqueue.testing.gitlab_simulator import webhooks
from workqueue.testing.gitlab_simulator.helpers_base import ProjectRef
from workqueue.testing.gitlab_simulator.helpers_webhooks import WebhookHelpers
from workqueue.testing.gitlab_simulator.hook_delivery import (
    HookDelivery,
    HookLoss,
    Outcome,
    ProjectHook,
    payload_project_id,
)


class HookDeliveryHelpers(WebhookHelpers):
    """Project hooks: `emit` sends an event to its project's hooks unless it is lost or
    the hook is disabled, and counts failures the way GitLab's auto-disabling does."""

    def add_project_hook(
        self, project: ProjectRef, url: str, *, secret_token: str | None = None
    ) -> int:
        """Register a webhook of `project` (every event kind); returns its id."""
        with self._locked() as state:
            return state.hook_deliveries.add(self._project(project).id, url, secret_token).id

    def project_hook(self, hook_id: int) -> ProjectHook:
        """A copy of the hook's record (failures, disabled until, permanently disabled)."""
        with self._locked() as state:
            hook = state.hook_deliveries.hooks[hook_id]
            return ProjectHook(**vars(hook))

    def lose_hooks(
        self,
        *,
        project: ProjectRef | None = None,
        kinds: Collection[str] = (),
        count: int | None = None,
    ) -> HookLoss:
        """Lose deliveries from now on: of `project` (default: every project), of `kinds`
        (object kinds such as "pipeline", "build"; default: every kind), the next `count`
        (default: until `stop()` is called on the returned rule, or `keep_hooks()`)."""
        with self._locked() as state:
            project_id = None if project is None else self._project(project).id
            return state.hook_deliveries.lose(project_id, kinds, count)

    def keep_hooks(self) -> None:
        """Stop every loss rule: deliveries reach their hooks again."""
        with self._locked() as state:
            for rule in state.hook_deliveries.losses:
                rule.stop()

    def disable_project_hooks(self, project: ProjectRef) -> None:
        """Disable the project's hooks as GitLab's auto-disabling (or a maintainer) does:
        nothing is sent to them, and nothing is kept for later, until re-enabled."""
        with self._locked() as state:
            for hook in state.hook_deliveries.of_project(self._project(project).id):
                hook.permanently_disabled = True

    def enable_project_hooks(self, project: ProjectRef) -> None:
        """Re-enable the project's hooks (a maintainer's "Enable"; failures forgotten)."""
        with self._locked() as state:
            for hook in state.hook_deliveries.of_project(self._project(project).id):
                hook.permanently_disabled = False
                hook.record_success()

    def hook_deliveries(self, *, kind: str | None = None) -> list[HookDelivery]:
        """What `emit` did, oldest first (optionally of one object kind)."""
        with self._locked() as state:
            return [d for d in state.hook_deliveries.log if kind is None or d.kind == kind]

    def emit(self, payload: Mapping[str, Any], *, timeout: float = 5.0) -> list[HookDelivery]:
        """GitLab sends `payload` (a hook body from the builders) to its project's hooks:
        each one either loses it, skips it (disabled), or POSTs it and records the answer.
        Returns what became of it for each hook (none registered: nothing)."""
        body = dict(payload)
        kind = str(body.get("object_kind"))
        project_id = payload_project_id(body)
        with self._locked() as state:
            now = state.now()
            version = state.gitlab_version_text
            instance_url = state.web_url
            targets: list[ProjectHook] = []
            skipped: list[HookDelivery] = []
            for hook in state.hook_deliveries.of_project(project_id):
                if state.hook_deliveries.is_lost(project_id, kind):
                    skipped.append(HookDelivery(hook.id, project_id, kind, "lost", at=now))
                elif hook.disabled_at(now):
                    skipped.append(HookDelivery(hook.id, project_id, kind, "disabled", at=now))
                else:
                    targets.append(ProjectHook(**vars(hook)))
            state.hook_deliveries.log.extend(skipped)
            if self._webhook_client is None:
                self._webhook_client = httpx.Client()
            client = self._webhook_client
        # POSTed outside the lock: a receiver may call the API back while answering.
        answers = [
            (hook, self._post(client, hook, body, instance_url, version, timeout))
            for hook in targets
        ]
        delivered: list[HookDelivery] = []
        with self._locked() as state:
            now = state.now()
            for copy, status in answers:
                hook = state.hook_deliveries.hooks[copy.id]
                ok = status is not None and 200 <= status < 300
                if ok:
                    hook.record_success()
                else:
                    hook.record_failure(now)
                outcome: Outcome = "delivered" if ok else "failed"
                delivered.append(HookDelivery(hook.id, project_id, kind, outcome, status, now))
            state.hook_deliveries.log.extend(delivered)
        return skipped + delivered

    @staticmethod
    def _post(
        client: httpx.Client,
        hook: ProjectHook,
        body: dict[str, Any],
        instance_url: str,
        version: str,
        timeout: float,
    ) -> int | None:
        """The receiver's status code; None when it never answered (GitLab's failure too)."""
        try:
            response = webhooks.deliver(
                client,
                hook.url,
                body,
                instance_url=instance_url,
                secret_token=hook.secret_token,
                timeout=timeout,
                gitlab_version=version,
            )
        except httpx.HTTPError:
            return None
        return response.status_code
