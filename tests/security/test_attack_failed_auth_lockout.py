"""Attack-review of the failed-authentication budget (API.md v1.2, "Answers"): an address
kept over its budget must not lock out the callers behind it whose tokens the service
already knows, however long the budget stays spent.

In the OpenShift deployment every caller reaches the service through the router (one
address, unless `FORWARDED_ALLOW_IPS` lists the routers), so anyone can keep that address
over its budget with 30 made-up tokens a minute. "Known tokens keep working" held only as
long as the caches did: an OpenShift user's cache entry expires after 5 minutes and a
JWT issuer's key set is stale after an hour, and from then on the offline check refused
every caller behind the address (429), although the calls needed are bounded (tokens seen
valid before; one key-set refresh per issuer and `min_refresh_seconds`).

Real HTTP (uvicorn), real PostgreSQL, the GitLab simulator, a real local OIDC issuer and a
real local OpenShift `users/~` endpoint; the authenticator's clock is moved by hand.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from auth_support import FakeClock, LocalOpenShift, claims_for, rsa_key, sign
from live_app import serve_in_thread
from mr_harness import TOKEN

from workqueue.api import gatekeeper as gatekeeper_module
from workqueue.api.app import create_app
from workqueue.auth.authenticator import Authenticator
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.settings import Settings
from workqueue.types.plugin import InstallContext

READER = "system:serviceaccount:ops:reader"
ROUTER = {"X-Forwarded-For": "10.128.2.5"}  # the address every caller shares


@pytest.fixture
def openshift() -> Iterator[LocalOpenShift]:
    server = LocalOpenShift()
    server.start()
    yield server
    server.stop()


@contextmanager
def service(
    database_url: Any,
    simulator: Any,
    issuer: Any,
    openshift: LocalOpenShift,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[httpx.Client]:
    monkeypatch.setattr(
        gatekeeper_module, "Authenticator", functools.partial(Authenticator, clock=clock)
    )
    rules: list[dict[str, Any]] = [
        {"groups": ["devs"], "permissions": ["read"]},
        {
            "issuer": issuer.issuer,
            "claims": {"aud": "workqueue-service", "sub": READER},
            "permissions": ["read"],
            "projects": ["**"],
        },
    ]
    settings = Settings(WORKQUEUE_SERVICE_OPENSHIFT_API_URL=openshift.url)
    config = ServiceConfig.model_validate(
        {
            "authorization": {"rules": rules},
            "processing": {"workers": 1},
            "handled_types": {"mr": {"gitlab_url": simulator.url}},
        }
    )
    app = create_app(
        settings,
        config,
        database_url=database_url,
        process_items=False,
        type_context=InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
    )
    with serve_in_thread(app) as base_url, httpx.Client(base_url=base_url, timeout=30) as client:
        yield client


def reader_token(issuer: Any, key: Any) -> dict[str, str]:
    signed = sign(claims_for(issuer.issuer, sub=READER, aud="workqueue-service"), key)
    return {"Authorization": f"Bearer {signed}"}


def spend_the_budget(client: httpx.Client) -> None:
    for n in range(30):
        headers = ROUTER | {"Authorization": f"Bearer sha256~made-up-{n}"}
        assert client.get("/api/work-items", headers=headers).status_code == 401
    over = client.get("/api/work-items", headers=ROUTER | {"Authorization": "Bearer sha256~x"})
    assert over.status_code == 429


def test_known_callers_keep_working_after_their_caches_expire(
    database_url, simulator, issuer, key, openshift, monkeypatch
):
    openshift.users["sha256~alice"] = ("alice", ["devs"])
    clock = FakeClock()
    with service(database_url, simulator, issuer, openshift, clock, monkeypatch) as client:
        alice = ROUTER | {"Authorization": "Bearer sha256~alice"}
        assert client.get("/api/work-items", headers=alice).status_code == 200
        assert client.get("/api/work-items", headers=ROUTER | reader_token(issuer, key)).is_success
        spend_the_budget(client)
        jwks_before, users_before = issuer.jwks_hits, openshift.user_hits

        # An hour and a bit later, the attacker having sent its 30 tokens every minute:
        # alice's cache entry and the issuer's key set have both expired.
        clock.advance(3601)
        again_alice = client.get("/api/work-items", headers=alice)
        new_job = client.get("/api/work-items", headers=ROUTER | reader_token(issuer, key))
        # Still nothing outbound for tokens never seen valid, nor for a forged signature.
        stranger = sign(claims_for(issuer.issuer, sub=READER), rsa_key("stranger"), kid=key.kid)
        forged = client.get(
            "/api/work-items", headers=ROUTER | {"Authorization": f"Bearer {stranger}"}
        )
        made_up = client.get(
            "/api/work-items", headers=ROUTER | {"Authorization": "Bearer sha256~y"}
        )

    assert again_alice.status_code == 200
    assert new_job.status_code == 200
    assert forged.status_code == 429
    assert made_up.status_code == 429
    # alice asked about once again; the key set refreshed once.
    assert openshift.user_hits == users_before + 1
    assert issuer.jwks_hits == jwks_before + 1


def test_a_known_token_revoked_since_is_refused_over_the_budget(
    database_url, simulator, issuer, key, openshift, monkeypatch
):
    openshift.users["sha256~mallory"] = ("mallory", ["devs"])
    clock = FakeClock()
    with service(database_url, simulator, issuer, openshift, clock, monkeypatch) as client:
        mallory = ROUTER | {"Authorization": "Bearer sha256~mallory"}
        assert client.get("/api/work-items", headers=mallory).status_code == 200
        spend_the_budget(client)
        del openshift.users["sha256~mallory"]  # the token is revoked
        clock.advance(301)
        first = client.get("/api/work-items", headers=mallory)
        hits = openshift.user_hits
        second = client.get("/api/work-items", headers=mallory)
    assert first.status_code in {401, 429}
    assert second.status_code in {401, 429}
    # Refused once by OpenShift, then no longer asked about.
    assert openshift.user_hits == hits
