"""Authentication comes first: /api/ requests without credentials get 401 before their body
is read, and every request is authenticated exactly once."""

from __future__ import annotations

import threading
import uuid

import pytest
from api_harness import build_client
from raw_http import send_partial

from workqueue.api.gatekeeper import build_gatekeeper
from workqueue.config import ServiceConfig
from workqueue.settings import Settings

# Ids of no item, fixed: they name the tests, which every xdist worker must collect alike.
POST_PATHS = (
    "/api/work-items/mr",
    f"/api/work-items/{uuid.UUID(int=1)}/retry",
    f"/api/work-items/{uuid.UUID(int=2)}/cancel",
)


SECRET = "edge-auth-secret"


@pytest.fixture
def anonymous(database_url, simulator):
    """No local user and no rules: no request can prove a caller (but GitLab can)."""
    with build_client(database_url, simulator, local_user=None, webhook_secret=SECRET) as client:
        yield client


def assert_401(response):
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    assert isinstance(response.json()["detail"], str)


@pytest.mark.parametrize("path", POST_PATHS)
@pytest.mark.parametrize(
    "content", [b"{nope", b'{"close_mr": NaN}', b"\xff\xfe{\x00}\x00", b"[" * 5000]
)
def test_a_bad_body_without_credentials_is_401_not_422(anonymous, path, content):
    answer = anonymous.post(path, content=content, headers={"content-type": "application/json"})

    assert_401(answer)


def test_the_routes_that_authenticate_themselves_are_left_to_do_so(anonymous):
    me = anonymous.get("/api/work-items/me", headers={"X-Forwarded-Access-Token": "sha256~abc"})
    hook = anonymous.post(
        "/api/webhooks/gitlab",
        json={"object_kind": "push"},
        headers={"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook"},
    )
    wrong_secret = anonymous.post("/api/webhooks/gitlab", content=b"{nope")

    assert (me.status_code, me.json()) == (200, {"token": "sha256~abc"})
    # A kind a handled type uses: stored for resolution (API.md), so "accepted".
    assert (hook.status_code, hook.json()) == (200, {"status": "accepted"})
    assert wrong_secret.status_code == 401
    assert wrong_secret.json() == {"detail": "missing or invalid X-Gitlab-Token"}
    assert "www-authenticate" not in wrong_secret.headers
    # Only GET /me is exempt: another method there needs a bearer token like the rest.
    assert_401(anonymous.post("/api/work-items/me"))


def test_an_unknown_api_path_without_credentials_is_401(anonymous):
    assert_401(anonymous.get("/api/nothing-here"))
    assert anonymous.get("/healthz").status_code == 200


def test_an_announced_15_mb_body_without_credentials_is_refused_without_reading_it(anonymous):
    answer = send_partial(
        str(anonymous.base_url),
        "POST",
        "/api/work-items/mr",
        headers={"Content-Type": "application/json", "Content-Length": str(15 * 1024 * 1024)},
        body_part=b'{"project": ',
        timeout=5,
    )

    assert answer.status == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert answer.seconds < 2
    assert answer.closed  # the rest of the 15 MB is not waited for


def test_an_invalid_token_is_401_before_the_body(anonymous):
    answer = send_partial(
        str(anonymous.base_url),
        "POST",
        "/api/work-items/mr",
        headers={"Authorization": "Bearer not-a-jwt", "Content-Length": "1000000"},
        timeout=5,
    )

    assert answer.status == 401
    assert answer.closed


class CountingGatekeeper:
    """The real gatekeeper, recording the thread of every `authenticate` call."""

    def __init__(self, inner):
        self.inner = inner
        self.threads: list[str] = []

    def authenticate(self, authorization):
        self.threads.append(threading.current_thread().name)
        return self.inner.authenticate(authorization)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_each_request_is_authenticated_once_off_the_event_loop(database_url, simulator):
    gatekeeper = CountingGatekeeper(
        build_gatekeeper(
            Settings(WORKQUEUE_SERVICE_LOCAL_AUTH_USER="dev-user"),
            ServiceConfig.model_validate({}),
        )
    )
    with build_client(database_url, simulator, gatekeeper=gatekeeper) as client:
        assert client.get("/api/work-items").status_code == 200
        assert client.get(f"/api/work-items/{uuid.uuid4()}").status_code == 404
        assert client.post(f"/api/work-items/{uuid.uuid4()}/cancel").status_code == 404
        assert client.get("/healthz").status_code == 200  # not under /api/: no authentication

    assert len(gatekeeper.threads) == 3
    # uvicorn's event loop runs in the thread `serve_in_thread` starts.
    assert "test-uvicorn" not in gatekeeper.threads
