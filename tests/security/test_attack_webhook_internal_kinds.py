"""Attack review, round 2 follow-up: event types the service stores for itself were
reachable from outside.

The trunk type keeps a push hint it could not act on as a delivery of its own,
`{"object_kind"...}`-less `trunk.read_head` `{"queue": name}`. A webhook (or an SQS
message) with `"object_kind": "trunk.read_head"` was routed to that internal creator:
anyone with a secret could make the service read and ingest any queue's head, in any
project, whatever the projects their secret covers. Only kinds GitLab sends are taken
from outside now; any other is an unhandled kind, answered "ignored" like every kind
no handled type uses. Real HTTP (the shortcut and the full stack), real database.
"""

from __future__ import annotations

import pytest
from scoping_support import VICTIM
from test_attack_webhook_project_secrets import (
    LEGACY_SECRET,
    TEAM_SECRET,
    deliver,
    service,
    stored,
)

from workqueue.gitlab.webhook_bodies import GITLAB_OBJECT_KINDS
from workqueue.types.trunk.landed_heads import READ_HEAD_EVENT

VICTIM_QUEUE = f"{VICTIM}:main"


@pytest.fixture(autouse=True)
def _secrets_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKQUEUE_TEST_HOOK_SECRET_TEAM", TEAM_SECRET)
    monkeypatch.setenv("WORKQUEUE_TEST_HOOK_SECRET_VICTIM", "only-victim-prod-knows-this")


@pytest.mark.parametrize("full_stack", [False, True], ids=["shortcut", "full-stack"])
@pytest.mark.parametrize(
    "body",
    [
        {"object_kind": READ_HEAD_EVENT, "queue": VICTIM_QUEUE},
        # Dressed as the scoped secret's own project: still not a kind GitLab sends.
        {
            "object_kind": READ_HEAD_EVENT,
            "queue": VICTIM_QUEUE,
            "project": {"id": 1, "path_with_namespace": "team/app"},
        },
    ],
    ids=["bare", "dressed"],
)
@pytest.mark.parametrize("token", [LEGACY_SECRET, TEAM_SECRET], ids=["legacy", "scoped"])
def test_a_kept_trunk_hint_from_outside_is_ignored_and_stores_nothing(
    database_url, sessions, simulator, body, token, full_stack
):
    before = stored(sessions)
    with service(database_url, simulator, legacy=LEGACY_SECRET, full_stack=full_stack) as app:
        answer = deliver(app.url, body, token, event="Push Hook")

    assert (answer.status_code, answer.json()) == (200, {"status": "ignored"})
    assert stored(sessions) == before


def test_no_event_type_a_handled_type_uses_for_itself_is_reachable_from_outside(
    database_url, sessions, simulator
):
    """Whatever internal kinds the types register (today `trunk.read_head`), a delivery
    naming one is an unhandled kind."""
    with service(database_url, simulator, secrets=[], legacy=LEGACY_SECRET) as app:
        registry = app.app.state.runtime.registry
        routed = {
            event_type
            for registration in registry
            for event_type in (*registration.resolvers, *registration.creators)
        }
        internal = sorted(routed - GITLAB_OBJECT_KINDS)
        before = stored(sessions)
        answers = {
            kind: deliver(app.url, {"object_kind": kind, "queue": VICTIM_QUEUE}, LEGACY_SECRET)
            for kind in internal
        }

    assert READ_HEAD_EVENT in internal
    assert {kind: answer.json() for kind, answer in answers.items()} == {
        kind: {"status": "ignored"} for kind in internal
    }
    assert stored(sessions) == before
    # The kinds GitLab sends that the types use are all still taken.
    assert routed & GITLAB_OBJECT_KINDS == {"build", "merge_request", "note", "pipeline", "push"}
