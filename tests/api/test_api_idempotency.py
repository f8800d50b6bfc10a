"""`Idempotency-Key` on submissions: a resend gets the first answer and changes nothing.

Callers carry real tokens from a local OIDC issuer, so two callers can send the
same key. Items are not processed (what is stored and answered is under test).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from api_harness import build_client
from scoping_support import ADMIN_SUB, OTHER_BOT, OWN, scoped_rules, submission, token

from workqueue.testing.gitlab_simulator import GitLabSimulator

MR_ITEMS = "/api/work-items/mr"
KEY = "kernel-sync-1"


@pytest.fixture
def client(database_url, simulator: GitLabSimulator, issuer) -> Iterator[httpx.Client]:
    simulator.create_project(OWN, {"README.md": "# hello\n", "kernel.spec": "Version: 1\n"})
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        process_items=False,
    ) as test_client:
        yield test_client


@pytest.fixture
def alice(issuer, key) -> dict[str, str]:
    return token(issuer, key, ADMIN_SUB)


@pytest.fixture
def bob(issuer, key) -> dict[str, str]:
    return token(issuer, key, OTHER_BOT)


def post(
    client: httpx.Client, caller: dict[str, str], body: dict[str, Any], key: str | None = KEY
) -> httpx.Response:
    headers = dict(caller) if key is None else {**caller, "Idempotency-Key": key}
    return client.post(MR_ITEMS, json=body, headers=headers)


def count(sessions, query: str, **params: Any) -> int:
    with sessions() as session:
        return int(session.execute(sa.text(query), params).scalar_one())


def submitted_entries(sessions) -> int:
    return count(sessions, "SELECT count(*) FROM audit_entries WHERE event_type = 'item_submitted'")


def test_the_same_key_twice_is_one_item_and_the_first_answer(client, sessions, alice):
    first = post(client, alice, submission(OWN))
    assert first.status_code == 201, first.text
    assert "Idempotent-Replayed" not in first.headers
    again = post(client, alice, submission(OWN))
    assert again.status_code == 201, again.text
    assert again.headers["Idempotent-Replayed"] == "true"
    assert (again.json()["id"], again.json()["outcome"]) == (first.json()["id"], "created")
    assert submitted_entries(sessions) == 1

    # Once the item ended, the resend still answers the first answer, with the item as
    # it is now, where a submission without the key starts a new generation.
    item = first.json()["id"]
    assert client.post(f"/api/work-items/{item}/cancel", headers=alice).status_code == 200
    late = post(client, alice, submission(OWN))
    assert (late.status_code, late.json()["id"]) == (201, item)
    assert (late.json()["phase"], late.json()["outcome"], late.json()["generation"]) == (
        "cancelled",
        "created",
        1,
    )
    assert count(sessions, "SELECT count(*) FROM work_items") == 1
    assert submitted_entries(sessions) == 1
    assert count(sessions, "SELECT count(*) FROM outbox_deliveries") == 0
    fresh = post(client, alice, submission(OWN), key=None)
    assert (fresh.status_code, fresh.json()["generation"]) == (201, 2)


def test_the_first_answer_is_replayed_whatever_it_was(client, alice):
    post(client, alice, submission(OWN), key=None)
    unchanged = post(client, alice, submission(OWN), key="resend-1")
    assert (unchanged.status_code, unchanged.json()["outcome"]) == (200, "unchanged")
    updated_body = submission(OWN, title="Sync v2")
    updated = post(client, alice, updated_body, key="resend-2")
    assert (updated.status_code, updated.json()["outcome"]) == (200, "updated")
    for key, outcome in (("resend-1", "unchanged"), ("resend-2", "updated")):
        body = submission(OWN) if key == "resend-1" else updated_body
        again = post(client, alice, body, key=key)
        assert (again.status_code, again.json()["outcome"]) == (200, outcome)
        # The item as it is now: the title the later submission gave.
        assert again.json()["details"]["title"] == "Sync v2"


def test_the_same_key_with_another_body_is_422_and_changes_nothing(client, sessions, alice):
    first = post(client, alice, submission(OWN))
    for other in (
        submission(OWN, title="Another title"),
        submission(OWN, branch="workqueue/other"),
        {**submission(OWN), "file_actions": [{"action": "delete", "file_path": "README.md"}]},
    ):
        refused = post(client, alice, other)
        assert refused.status_code == 422, refused.text
        (error,) = refused.json()["detail"]
        assert error["loc"] == ["header", "Idempotency-Key"]
        assert "another request" in error["msg"]
    item = client.get(f"/api/work-items/{first.json()['id']}", headers=alice).json()
    assert item["details"]["title"] == "Sync"
    assert count(sessions, "SELECT count(*) FROM work_items") == 1
    # Spelled differently but the same request (defaults written out, keys reordered).
    same = dict(reversed(list({**submission(OWN), "auto_merge": True, "labels": []}.items())))
    assert post(client, alice, same).status_code == 201


def test_keys_are_per_caller(client, sessions, alice, bob):
    mine = post(client, alice, submission(OWN))
    # Bob's key of the same text is his own: his body makes his own item...
    theirs = post(client, bob, submission(OWN, branch="workqueue/bob"))
    assert theirs.status_code == 201, theirs.text
    assert theirs.json()["id"] != mine.json()["id"]
    # ...and Alice's body under her key shows Bob nothing of hers: it is a submission
    # of his own, refused because her live item holds the branch.
    guessed = post(client, bob, submission(OWN), key="kernel-sync-2")
    assert guessed.status_code == 409, guessed.text
    assert mine.json()["id"] not in guessed.text
    assert "Idempotent-Replayed" not in guessed.headers
    assert post(client, alice, submission(OWN)).json()["id"] == mine.json()["id"]


def test_a_refused_submission_records_no_key(client, sessions, alice):
    blocked = {
        **submission(OWN),
        "file_actions": [{"action": "create", "file_path": ".gitlab-ci.yml", "content": "x\n"}],
    }
    refused = post(client, alice, blocked)
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"][0] == "body"
    assert count(sessions, "SELECT count(*) FROM submission_keys") == 0
    # The fixed body under the same key is a new submission, not "another request".
    assert post(client, alice, submission(OWN)).status_code == 201


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"k" * 256, id="256 characters"),
        pytest.param("clé".encode(), id="not ASCII"),
        pytest.param(b"tab\tinside", id="a control character"),
    ],
)
def test_a_key_that_is_not_1_to_255_printable_ascii_is_422(client, sessions, alice, header):
    refused = client.post(
        MR_ITEMS, json=submission(OWN), headers={**alice, "Idempotency-Key": header}
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    assert count(sessions, "SELECT count(*) FROM work_items") == 0


def test_two_keys_in_one_request_are_422_and_255_characters_are_fine(client, alice):
    both = [*alice.items(), ("Idempotency-Key", "one"), ("Idempotency-Key", "two")]
    refused = client.post(MR_ITEMS, json=submission(OWN), headers=both)
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    longest = "~ " * 127 + "!"
    assert post(client, alice, submission(OWN), key=longest).status_code == 201
    assert post(client, alice, submission(OWN), key=longest).headers["Idempotent-Replayed"]


def test_identical_requests_at_the_same_time_make_one_item(client, sessions, alice):
    callers = 6
    start = threading.Barrier(callers)
    answers: list[httpx.Response] = []

    def send() -> None:
        start.wait()
        answers.append(post(client, alice, submission(OWN)))

    threads = [threading.Thread(target=send) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [answer.status_code for answer in answers] == [201] * callers
    assert len({answer.json()["id"] for answer in answers}) == 1
    assert {answer.json()["outcome"] for answer in answers} == {"created"}
    assert count(sessions, "SELECT count(*) FROM work_items") == 1
    assert submitted_entries(sessions) == 1


def test_a_replay_counts_against_the_callers_rate(database_url, simulator, issuer, key):
    simulator.create_project(OWN, {"README.md": "# hello\n", "kernel.spec": "Version: 1\n"})
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        limits={"submissions_per_minute_per_caller": 2},
        process_items=False,
    ) as limited:
        caller = token(issuer, key, ADMIN_SUB)
        assert post(limited, caller, submission(OWN)).status_code == 201
        assert post(limited, caller, submission(OWN)).status_code == 201
        over = post(limited, caller, submission(OWN))
        assert over.status_code == 429
        assert "Retry-After" in over.headers


def test_a_replay_shows_nothing_once_the_caller_lost_the_project(
    database_url, simulator, issuer, key
):
    simulator.create_project(OWN, {"README.md": "# hello\n", "kernel.spec": "Version: 1\n"})
    caller = token(issuer, key, ADMIN_SUB)
    everywhere = scoped_rules(issuer.issuer)
    elsewhere = (
        {
            "issuer": issuer.issuer,
            "claims": {"aud": "workqueue-service", "sub": ADMIN_SUB},
            "permissions": ["read", "submit"],
            "projects": ["other/**"],
        },
    )
    for rules, status in ((everywhere, 201), (elsewhere, 403)):
        with build_client(
            database_url, simulator, local_user=None, rules=rules, process_items=False
        ) as app:
            answer = post(app, caller, submission(OWN))
            assert answer.status_code == status, answer.text
    assert "details" not in answer.text


def test_a_trunk_head_resent_with_its_key_is_the_first_answer_after_the_head_moved(
    database_url, simulator, issuer, key
):
    simulator.create_project(OWN, {"README.md": "# hello\n"})
    section = {"gitlab_url": simulator.url, "queues": [{"project": OWN, "branch": "main"}]}
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        handled_types={"trunk": section},
        process_items=False,
    ) as app:
        caller = {**token(issuer, key, ADMIN_SUB), "Idempotency-Key": "head-1"}
        head = {"project": OWN, "branch": "main", "sha": simulator.branch_head(OWN, "main")}
        first = app.post("/api/work-items/trunk", json=head, headers=caller)
        assert first.status_code == 201, first.text
        simulator.push(OWN, "main", {"README.md": "# moved\n"})
        simulator.reset_requests()
        again = app.post("/api/work-items/trunk", json=head, headers=caller)
        assert (again.status_code, again.json()["id"]) == (201, first.json()["id"])
        assert again.json()["outcome"] == "created"
        assert simulator.request_count() == 0  # not even the head is read again
        newer = {**head, "sha": simulator.branch_head(OWN, "main")}
        refused = app.post("/api/work-items/trunk", json=newer, headers=caller)
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
