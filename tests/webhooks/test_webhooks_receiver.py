"""POST /api/webhooks/gitlab over real HTTP: tokens, de-duplication, irrelevant events, errors."""

from __future__ import annotations

import json
import threading
import uuid

import httpx
import psycopg
import pytest
import sqlalchemy as sa
from raw_http import send_partial
from webhook_support import (
    NEW_SECRET,
    OLD_SECRET,
    actionable,
    deliveries,
    make_item,
    pending,
    resolved,
    webhook_app,
)

from workqueue.api.webhooks.route import delivery_key
from workqueue.api.webhooks.secrets import WebhookSecrets
from workqueue.db.url import libpq_conninfo
from workqueue.gitlab.webhook_bodies import gitlab_event_type
from workqueue.queue.enqueue import WAKE_CHANNEL
from workqueue.testing.gitlab_simulator import ZERO_SHA


@pytest.fixture
def item(sessions, service, world):
    return make_item(
        sessions,
        service.runtime.registry,
        project=world.project_path,
        source_branch=world.branch,
        mr_iid=world.iid,
        mr_sha=world.sha,
        head_pipeline_id=world.pipeline_id,
    )


def mr_hook(simulator, world, **options):
    return simulator.merge_request_hook(world.project_id, world.iid, **options)


def post_raw(url, content, headers):
    return httpx.post(url, content=content, headers=headers, timeout=10)


# -- authentication -----------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [None, "", "wrong", OLD_SECRET[:-1], OLD_SECRET + "x", f"{OLD_SECRET},{NEW_SECRET}"],
)
def test_a_missing_or_wrong_token_answers_401_and_stores_nothing(
    simulator, service, world, item, sessions, token
):
    response = simulator.send_webhook(service.url, mr_hook(simulator, world), secret_token=token)

    assert response.status_code == 401
    assert response.json() == {"detail": "missing or invalid X-Gitlab-Token"}
    assert pending(sessions) == []
    assert deliveries(sessions) == []
    assert not actionable(sessions, item)


def test_the_token_is_checked_before_the_body(service, sessions):
    response = post_raw(service.url, b"not json", {"X-Gitlab-Token": "wrong"})

    assert response.status_code == 401


@pytest.mark.parametrize("token", [None, "wrong"])
def test_a_bad_token_is_answered_before_the_body_arrives(service, token):
    """An announced 1 MiB body that never comes: 401 at once, connection closed."""
    headers = {"Content-Type": "application/json", "Content-Length": str(1024 * 1024)}
    if token is not None:
        headers["X-Gitlab-Token"] = token
    answer = send_partial(
        service.url, "POST", "/api/webhooks/gitlab", headers=headers, body_part=b'{"obj', timeout=5
    )
    assert answer.status == 401
    assert answer.json() == {"detail": "missing or invalid X-Gitlab-Token"}
    assert answer.closed


@pytest.mark.parametrize("secret", [OLD_SECRET, NEW_SECRET])
def test_every_configured_secret_is_accepted_during_a_rotation(
    simulator, service, world, item, sessions, secret
):
    response = simulator.send_webhook(service.url, mr_hook(simulator, world), secret_token=secret)

    assert response.status_code == 200
    assert response.json() == {"status": "accepted"}
    assert [event[0] for event in pending(sessions)] == [item]


def test_without_a_configured_secret_every_delivery_is_refused(
    database_url, simulator, world, sessions, caplog
):
    with webhook_app(database_url, simulator.url, secrets=" , ") as service:
        make_item(
            sessions,
            service.runtime.registry,
            project=world.project_path,
            source_branch=world.branch,
            mr_iid=world.iid,
        )
        answers = [
            simulator.send_webhook(
                service.url, mr_hook(simulator, world), secret_token=token
            ).status_code
            for token in (None, "", ",", "anything")
        ]

    assert answers == [401, 401, 401, 401]
    assert pending(sessions) == []
    assert deliveries(sessions) == []
    assert "WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET is not set" in caplog.text


def test_secrets_parse_comma_separated_values_and_never_print_them():
    secrets = WebhookSecrets.parse(" a1 ,, b2 ,")

    assert len(secrets) == 2
    assert secrets.matches("a1")
    assert secrets.matches("b2")
    assert not secrets.matches(" a1 ")
    assert not secrets.matches(None)
    assert not secrets.matches("é")  # non-ASCII compares as bytes, no TypeError
    assert "a1" not in repr(secrets)
    assert not WebhookSecrets.parse(None)
    assert not WebhookSecrets.parse(" , ").matches("")


# -- de-duplication -------------------------------------------------------------------


def test_the_same_delivery_three_times_is_applied_once(simulator, service, world, item, sessions):
    payload = mr_hook(simulator, world)
    key = str(uuid.uuid4())

    answers = [
        simulator.send_webhook(
            service.url, payload, secret_token=NEW_SECRET, idempotency_key=key
        ).json()["status"]
        for _ in range(3)
    ]

    assert answers == ["accepted", "duplicate", "duplicate"]
    assert pending(sessions) == [(item, "merge_request", f"{key}:{item}")]
    assert deliveries(sessions) == [(key, "webhook", "merge_request")]


def test_redelivery_with_a_new_event_uuid_but_the_same_idempotency_key_is_a_duplicate(
    simulator, service, world, item, sessions
):
    payload = mr_hook(simulator, world)
    first = simulator.send_webhook(
        service.url, payload, secret_token=OLD_SECRET, idempotency_key="k-1", event_uuid="e-1"
    )
    second = simulator.send_webhook(
        service.url, payload, secret_token=OLD_SECRET, idempotency_key="k-1", event_uuid="e-2"
    )

    assert (first.json(), second.json()) == ({"status": "accepted"}, {"status": "duplicate"})
    assert len(pending(sessions)) == 1


def test_without_idempotency_key_the_event_uuid_then_a_body_hash_identifies_the_delivery(
    simulator, service, world, item, sessions
):
    body = json.dumps(mr_hook(simulator, world)).encode()
    base = {"X-Gitlab-Token": OLD_SECRET, "X-Gitlab-Event": "Merge Request Hook"}
    with_uuid = {**base, "X-Gitlab-Event-UUID": "uuid-1"}

    answers = [
        post_raw(service.url, body, with_uuid).json()["status"],
        post_raw(service.url, body, with_uuid).json()["status"],
        post_raw(service.url, body, base).json()["status"],  # no header: hash of the body
        post_raw(service.url, body, base).json()["status"],
        post_raw(service.url, body + b" ", base).json()["status"],  # other bytes, other hash
    ]

    assert answers == ["accepted", "duplicate", "accepted", "duplicate", "accepted"]
    keys = [key for key, _, _ in deliveries(sessions)]
    assert "uuid-1" in keys
    assert sum(key.startswith("sha256:") for key in keys) == 2
    assert len(pending(sessions)) == 3


def test_concurrent_copies_of_one_delivery_store_it_once(simulator, service, world, item, sessions):
    payload = mr_hook(simulator, world)
    answers: list[str] = []
    barrier = threading.Barrier(8)

    def send():
        barrier.wait()
        response = simulator.send_webhook(
            service.url, payload, secret_token=OLD_SECRET, idempotency_key="same"
        )
        answers.append(response.json()["status"])

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(answers) == ["accepted"] + ["duplicate"] * 7
    assert len(pending(sessions)) == 1


# -- what gets stored, and the wake-up ------------------------------------------------------


def test_an_accepted_delivery_marks_the_item_actionable_and_notifies_after_commit(
    simulator, service, world, item, sessions, database_url
):
    with psycopg.connect(libpq_conninfo(database_url), autocommit=True) as listener:
        listener.execute(f"LISTEN {WAKE_CHANNEL}")
        response = simulator.send_webhook(
            service.url, simulator.pipeline_hook(world.pipeline_id), secret_token=OLD_SECRET
        )
        notifications = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]

    assert response.json() == {"status": "accepted"}
    assert notifications == [f"mr:{item}"]
    assert actionable(sessions, item)
    [(item_id, event_type, _)] = pending(sessions)
    assert (item_id, event_type) == (item, "pipeline")


def test_each_hook_kind_is_stored_under_its_object_kind(simulator, service, world, item, sessions):
    before = simulator.branch_head(world.project_id, world.branch)
    after = simulator.push(world.project_id, world.branch, {"x.txt": "human\n"}, user="ada")
    hooks = [
        mr_hook(simulator, world),
        simulator.pipeline_hook(world.pipeline_id),
        simulator.job_hook(world.job_id),
        simulator.note_hook(world.note_id),
        simulator.push_hook(world.project_id, world.branch, before=before, after=after),
    ]

    answers = [
        simulator.send_webhook(service.url, hook, secret_token=OLD_SECRET).json()["status"]
        for hook in hooks
    ]

    assert answers == ["accepted"] * 5
    assert [(i, kind) for i, kind, _ in pending(sessions)] == [
        (item, "merge_request"),
        (item, "pipeline"),
        (item, "build"),
        (item, "note"),
        (item, "push"),
    ]


def test_a_push_to_the_target_branch_reaches_every_item_targeting_it(
    simulator, service, world, sessions
):
    registry = service.runtime.registry
    targeting = [
        make_item(sessions, registry, project=world.project_path, source_branch=f"workqueue/{n}")
        for n in range(3)
    ]
    make_item(
        sessions,
        registry,
        project=world.project_path,
        source_branch="workqueue/x",
        target_branch="rel",
    )
    before = simulator.branch_head(world.project_id, "main")
    after = simulator.push(world.project_id, "main", {"other.txt": "landed\n"})
    hook = simulator.push_hook(world.project_id, "main", before=before, after=after)

    response = simulator.send_webhook(
        service.url, hook, secret_token=OLD_SECRET, idempotency_key="push-1"
    )

    assert response.json() == {"status": "accepted"}
    stored = pending(sessions)
    assert sorted(i for i, _, _ in stored) == sorted(targeting)
    assert sorted(key for _, _, key in stored) == sorted(f"push-1:{i}" for i in targeting)


def test_without_object_kind_the_event_header_names_the_type(
    simulator, service, world, item, sessions
):
    hook = simulator.job_hook(world.job_id)
    del hook["object_kind"]
    headers = {"X-Gitlab-Token": OLD_SECRET, "X-Gitlab-Event": "Job Hook", "Idempotency-Key": "j"}

    response = post_raw(service.url, json.dumps(hook).encode(), headers)

    assert response.json() == {"status": "accepted"}
    assert [kind for _, kind, _ in pending(sessions)] == ["build"]


def test_nul_characters_are_dropped_rather_than_failing_the_delivery(
    simulator, service, world, item, sessions
):
    hook = simulator.note_hook(world.note_id)
    hook["object_attributes"]["note"] = "a\u0000b\ud800c"

    response = simulator.send_webhook(service.url, hook, secret_token=OLD_SECRET)

    assert response.json() == {"status": "accepted"}
    resolved(sessions)
    with sessions() as session:
        note = session.execute(
            sa.text("SELECT body -> 'object_attributes' ->> 'note' FROM pending_events")
        ).scalar_one()
    assert note == "ab?c"


# -- irrelevant events -------------------------------------------------------------------------


def test_events_for_unknown_projects_store_nothing_but_are_remembered(
    simulator, service, world, item, sessions
):
    other = simulator.create_project("acme/other", {"README.md": "x\n"})
    simulator.push(other, world.branch, {"a.txt": "a\n"})
    iid = simulator.create_merge_request(other, world.branch, "Other")
    hook = simulator.merge_request_hook(other, iid)

    answers = [
        simulator.send_webhook(
            service.url, hook, secret_token=OLD_SECRET, idempotency_key="other-1"
        ).json()["status"]
        for _ in range(2)
    ]

    # Accepted (stored for resolution, API.md), then resolved to no item.
    assert answers == ["accepted", "duplicate"]
    assert pending(sessions) == []
    assert deliveries(sessions) == [("other-1", "webhook", "merge_request")]


@pytest.mark.parametrize("phase", ["completed", "cancelled", "failed"])
def test_events_for_items_that_are_not_active_store_nothing(
    simulator, service, world, sessions, phase
):
    done = make_item(
        sessions,
        service.runtime.registry,
        project=world.project_path,
        source_branch=world.branch,
        mr_iid=world.iid,
        phase=phase,
    )

    response = simulator.send_webhook(
        service.url, mr_hook(simulator, world), secret_token=NEW_SECRET
    )

    assert response.json() == {"status": "accepted"}
    assert pending(sessions) == []
    assert not actionable(sessions, done)


@pytest.mark.parametrize(
    ("payload", "event_header"),
    [
        ({"object_kind": "tag_push", "ref": "refs/tags/v1"}, "Tag Push Hook"),
        ({"object_kind": "issue", "object_attributes": {"iid": 1}}, "Issue Hook"),
        ({"no": "kind"}, "Unknown Hook"),
        ({"no": "kind"}, None),
    ],
)
def test_event_kinds_nothing_handles_are_ignored_without_storing_anything(
    service, sessions, payload, event_header
):
    headers = {"X-Gitlab-Token": OLD_SECRET, "Idempotency-Key": str(uuid.uuid4())}
    if event_header is not None:
        headers["X-Gitlab-Event"] = event_header

    response = post_raw(service.url, json.dumps(payload).encode(), headers)

    assert response.status_code == 200
    assert response.json() == {"status": "ignored"}
    assert deliveries(sessions) == []


def test_a_deleted_branch_push_for_an_unknown_branch_stores_nothing(
    simulator, service, world, item, sessions
):
    hook = simulator.push_hook(world.project_id, "feature/x", before=world.sha, after=ZERO_SHA)

    response = simulator.send_webhook(service.url, hook, secret_token=OLD_SECRET)

    assert response.json() == {"status": "accepted"}
    assert pending(sessions) == []


# -- malformed requests --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b"[1, 2]", b'"text"', b"null", b'{"a": NaN}', b"\xff\xfe{}", b"[" * 100_000],
)
def test_a_body_that_is_not_a_json_object_answers_400(service, sessions, content):
    response = post_raw(
        service.url, content, {"X-Gitlab-Token": OLD_SECRET, "X-Gitlab-Event": "Push Hook"}
    )

    assert response.status_code == 400
    assert response.json() == {"detail": "the body must be a JSON object"}
    assert deliveries(sessions) == []


def test_a_body_over_the_size_limit_answers_413(database_url, simulator, sessions):
    with webhook_app(database_url, simulator.url, max_body_bytes=1024) as service:
        response = post_raw(
            service.url,
            json.dumps({"object_kind": "push", "pad": "x" * 2048}).encode(),
            {"X-Gitlab-Token": OLD_SECRET},
        )

    assert response.status_code == 413
    assert deliveries(sessions) == []


# -- pure helpers ------------------------------------------------------------------------------


def test_event_type_prefers_object_kind_and_falls_back_to_the_header():
    assert gitlab_event_type({"object_kind": "build"}, "Pipeline Hook") == "build"
    assert gitlab_event_type({}, "Job Hook") == "build"
    assert gitlab_event_type({}, " Merge Request Hook ") == "merge_request"
    assert gitlab_event_type({"object_kind": 3}, "Note Hook") == "note"
    assert gitlab_event_type({"object_kind": "x" * 65}, None) is None
    assert gitlab_event_type({}, "Something Else") is None


def test_delivery_key_precedence():
    body = b"{}"
    assert delivery_key({"idempotency-key": "i", "x-gitlab-event-uuid": "e"}, body) == "i"
    assert delivery_key({"idempotency-key": " ", "x-gitlab-event-uuid": "e"}, body) == "e"
    assert delivery_key({}, body).startswith("sha256:")
    assert delivery_key({}, body) == delivery_key({}, body)
    assert delivery_key({}, body) != delivery_key({}, b"{ }")
