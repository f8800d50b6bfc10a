"""Simulator helpers that build webhook payloads from the current state and deliver them."""

from __future__ import annotations

from typing import Any

import httpx

from workqueue.testing.gitlab_simulator import note_hooks, webhooks
from workqueue.testing.gitlab_simulator.helpers_base import ProjectRef, SimulatorBase
from workqueue.testing.gitlab_simulator.repository import ZERO_SHA


class WebhookHelpers(SimulatorBase):
    """Helpers that build hook payloads from the current state and POST them."""

    # One pooled client for all deliveries: building an httpx client costs tens of ms.
    _webhook_client: httpx.Client | None = None

    def close_webhook_client(self) -> None:
        with self._locked():
            client, self._webhook_client = self._webhook_client, None
        if client is not None:
            client.close()

    def merge_request_hook(
        self,
        project: ProjectRef,
        iid: int,
        *,
        action: str = "update",
        user: str | None = None,
        oldrev: str | None = None,
        changes: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A Merge Request Hook payload; pass `oldrev` for an update that added commits."""
        with self._locked() as state:
            found, mr = self._mr(project, iid)
            actor = self._user(user, self.human)
            return webhooks.merge_request_hook(
                state, found, mr, actor, action, oldrev=oldrev, changes=changes
            )

    def pipeline_hook(self, pipeline_id: int) -> dict[str, Any]:
        with self._locked() as state:
            return webhooks.pipeline_hook(state, state.pipelines[pipeline_id])

    def job_hook(self, job_id: int) -> dict[str, Any]:
        with self._locked() as state:
            return webhooks.job_hook(state, state.jobs[job_id])

    def note_hook(
        self, note_id: int, action: str = "create", *, user: str | None = None
    ) -> dict[str, Any]:
        """The Note Hook for a note on an MR or an issue (`action` "create" or "update";
        `user`, who acted, defaults to the author, or the last editor on "update").
        Send it under `note_hook_event(note_id)`; `send_webhook` and `emit` derive that
        header from the body's `event_type`."""
        with self._locked() as state:
            actor = None if user is None else state.users[user]
            return note_hooks.note_hook(state, state.notes[note_id], action=action, user=actor)

    def note_hook_event(self, note_id: int) -> str:
        """`X-Gitlab-Event` of the note's hook: "Note Hook", or "Confidential Note Hook"
        for an internal note or a note on a confidential issue."""
        with self._locked() as state:
            note = state.notes[note_id]
            confidential = note_hooks.is_confidential(note, state.noteable_of(note))
            return "Confidential Note Hook" if confidential else "Note Hook"

    def push_hook(
        self,
        project: ProjectRef,
        branch: str,
        *,
        before: str,
        after: str | None = None,
        user: str | None = None,
    ) -> dict[str, Any]:
        """A Push Hook for `before..after` (default: the branch head; zeros for a deletion)."""
        with self._locked() as state:
            found = self._project(project)
            head = after or found.repository.branches.get(branch) or ZERO_SHA
            actor = self._user(user, self.human)
            return webhooks.push_hook(state, found, branch, before=before, after=head, user=actor)

    def send_webhook(
        self,
        url: str,
        payload: dict[str, Any],
        *,
        secret_token: str | None = None,
        event_uuid: str | None = None,
        idempotency_key: str | None = None,
        timeout: float = 5.0,
        event: str | None = None,
    ) -> httpx.Response:
        """POST a payload with GitLab's headers (`X-Gitlab-Event` from its `object_kind`,
        unless `event` names it)."""
        with self._locked() as state:
            instance_url = state.web_url
            version = state.gitlab_version_text
            if self._webhook_client is None:
                self._webhook_client = httpx.Client()
            client = self._webhook_client
        return webhooks.deliver(
            client,
            url,
            payload,
            instance_url=instance_url,
            secret_token=secret_token,
            event_uuid=event_uuid,
            idempotency_key=idempotency_key,
            timeout=timeout,
            gitlab_version=version,
            event=event,
        )
