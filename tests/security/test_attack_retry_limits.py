"""Attack (fixed): `POST /retry` used to escape both per-caller limits of `authorization.limits`.

* `max_live_items_per_caller` is only checked when a submission *creates* an
  item; retrying a cancelled item makes it live again without the check, so a
  caller can hold any number of live items (cancel N, create N, retry N, ...).
* `submissions_per_minute_per_caller` counts only `POST /api/work-items/mr`;
  every cancel + retry cycle re-runs ensure_mr, i.e. a fresh force-pushed
  commit (and a CI pipeline) on GitLab, unmetered.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_harness import build_client
from harness import wait_until
from scoping_support import ADMIN_SUB, OWN, scoped_rules, submission, token

COMMITS_ROUTE = "/projects/:id/repository/commits"


@pytest.fixture
def limited(database_url, simulator, issuer, projects) -> Iterator[httpx.Client]:
    del projects
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        limits={"submissions_per_minute_per_caller": 100, "max_live_items_per_caller": 2},
        process_items=False,
    ) as test_client:
        yield test_client


def test_retry_of_cancelled_items_exceeds_max_live_items(limited, issuer, key):
    client, admin = limited, token(issuer, key, ADMIN_SUB)

    def create(branch: str) -> httpx.Response:
        return client.post("/api/work-items/mr", json=submission(OWN, branch), headers=admin)

    first = [create(f"workqueue/a{n}").json()["id"] for n in range(2)]
    assert create("workqueue/over").status_code == 429  # the limit works for creation
    for item_id in first:
        assert client.post(f"/api/work-items/{item_id}/cancel", headers=admin).status_code == 200
    second = [create(f"workqueue/b{n}") for n in range(2)]
    assert [r.status_code for r in second] == [201, 201]
    retried = [client.post(f"/api/work-items/{i}/retry", headers=admin) for i in first]
    assert [r.status_code for r in retried] == [429, 429]
    assert all(r.headers["retry-after"] == "60" for r in retried)
    live = [
        i
        for i in client.get("/api/work-items", headers=admin).json()["items"]
        if i["phase"] in {"active", "failed"}
    ]
    assert len(live) == 2
    # With room again (one live item cancelled), a retry goes through.
    assert (
        client.post(f"/api/work-items/{second[0].json()['id']}/cancel", headers=admin).status_code
        == 200
    )
    assert client.post(f"/api/work-items/{first[0]}/retry", headers=admin).status_code == 200


@pytest.fixture
def rate_limited(database_url, simulator, issuer, projects) -> Iterator[httpx.Client]:
    del projects
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        limits={"submissions_per_minute_per_caller": 2},
    ) as test_client:
        yield test_client


def test_retries_count_against_the_submission_rate(rate_limited, simulator, issuer, key):
    """Each retry re-runs ensure_mr (a fresh force-push and CI run): it is metered."""
    client, admin = rate_limited, token(issuer, key, ADMIN_SUB)
    created = client.post(
        "/api/work-items/mr", json=submission(OWN, auto_merge=False), headers=admin
    )
    assert created.status_code == 201
    item_id = created.json()["id"]

    def idle_with_mr() -> bool:
        body = client.get(f"/api/work-items/{item_id}", headers=admin).json()
        return body["phase"] == "active" and not body["actionable"] and body["details"]["mr_iid"]

    wait_until(idle_with_mr, what="first MR")
    # Limit 2 per minute: the submission plus one retry; the next retry is refused.
    assert client.post(f"/api/work-items/{item_id}/cancel", headers=admin).status_code == 200
    assert client.post(f"/api/work-items/{item_id}/retry", headers=admin).status_code == 200
    wait_until(idle_with_mr, what="re-ensured MR")
    assert client.post(f"/api/work-items/{item_id}/cancel", headers=admin).status_code == 200
    refused = client.post(f"/api/work-items/{item_id}/retry", headers=admin)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert client.get(f"/api/work-items/{item_id}", headers=admin).json()["phase"] == "cancelled"
    assert simulator.request_count("POST", COMMITS_ROUTE) == 2
