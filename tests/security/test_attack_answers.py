"""Attack-review of the answers themselves (API.md v1.2, "Answers"): no 5xx from any path or
query parameter, an ambiguous credential refused, no `/api/` answer kept by a cache, and
failed authentications that cost the service nothing beyond a budget per client address.
Real HTTP (uvicorn), real PostgreSQL, the GitLab simulator, a real local OIDC issuer and a
real local OpenShift `users/~` endpoint."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from auth_support import LocalOpenShift, claims_for, rsa_key, sign
from fastapi.routing import APIRoute
from live_app import serve_in_thread
from mr_harness import TOKEN
from raw_http import send_partial

from workqueue.api.app import create_app
from workqueue.api.webhooks.route import WEBHOOK_PATH
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.settings import Settings
from workqueue.types.plugin import InstallContext
from workqueue.ui.pages import router as dashboard_router

SECRET = "hook-secret"
READER = "system:serviceaccount:ops:reader"
HOOK = b'{"object_kind": "pipeline", "object_attributes": {"id": 7}}'


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
    *,
    issuer: Any = None,
    openshift: LocalOpenShift | None = None,
    local_user: str | None = None,
) -> Iterator[tuple[httpx.Client, Any]]:
    """The service as `create_app` builds it, served by uvicorn; (client, app)."""
    rules: list[dict[str, Any]] = [{"groups": ["devs"], "permissions": ["read"]}]
    if issuer is not None:
        rules.append(
            {
                "issuer": issuer.issuer,
                "claims": {"aud": "workqueue-service", "sub": READER},
                "permissions": ["read", "retry"],
                "projects": ["**"],
            }
        )
    settings = Settings(
        WORKQUEUE_SERVICE_LOCAL_AUTH_USER=local_user,
        WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=SECRET,
        WORKQUEUE_SERVICE_OPENSHIFT_API_URL=None if openshift is None else openshift.url,
    )
    config = ServiceConfig.model_validate(
        {
            "authorization": {"rules": rules},
            "processing": {"workers": 1},
            "handled_types": {"mr": {"gitlab_url": simulator.url}},
            "attention": {"queues": [{"name": "triage", "match": {"phase": "failed"}}]},
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
        yield client, app


def reader_token(issuer: Any, key: Any) -> dict[str, str]:
    signed = sign(claims_for(issuer.issuer, sub=READER, aud="workqueue-service"), key)
    return {"Authorization": f"Bearer {signed}"}


# --- (a) path and query parameters -------------------------------------------------------


def test_a_nul_in_the_queue_name_is_422_on_the_path_parameter(database_url, simulator):
    with service(database_url, simulator, local_user="dev-user") as (client, _):
        answers = [
            client.get("/api/queues/tri%00age/items"),
            client.post("/api/queues/tri%00age/items", json={"work_item_id": str(uuid.uuid4())}),
            client.delete(f"/api/queues/tri%00age/items/{uuid.uuid4()}"),
        ]
    assert [answer.status_code for answer in answers] == [422, 422, 422]
    for answer in answers:
        assert ["path", "name"] in [entry["loc"] for entry in answer.json()["detail"]]


# Raw (already percent-encoded) values put into one parameter at a time.
REFUSED_TEXT = {
    "nul": "%00",
    "nul inside": "ab%00cd",
    "control": "%01",
    "newline": "a%0Ab",
    "delete": "%7F",
    "C1 control": "a%C2%85b",
    "overlong": "a" * 5000,
}
ODD_BUT_PRINTABLE = {
    "invalid UTF-8": "%FF%FE",
    "encoded surrogate": "%ED%A0%80",
    "huge number": "9" * 40,
    "negative": "-1",
    "dot dot": "..",
    "space": "%20",
    "right-to-left override": "%E2%80%AE",
    "quote": "%27%22",
}
# Query parameters the dashboard reads from the request itself (not declared on the route).
UI_QUERY_PARAMETERS = {"/ui/": ("type", "phase", "project", "queue", "cursor")}


def routes_with_parameters(app: Any) -> list[tuple[str, str, list[str], list[str]]]:
    """(method, path, path parameters, query parameters) of every route that takes any:
    the API's from its OpenAPI document, the dashboard's (not in it) from its router."""
    found = []
    for path, operations in app.openapi()["paths"].items():
        for method, operation in operations.items():
            parameters = operation.get("parameters", [])
            path_names = [p["name"] for p in parameters if p["in"] == "path"]
            query_names = [p["name"] for p in parameters if p["in"] == "query"]
            if path_names or query_names:
                found.append((method.upper(), path, path_names, query_names))
    for route in dashboard_router.routes:
        assert isinstance(route, APIRoute)
        path_names = list(route.param_convertors)
        query_names = list(UI_QUERY_PARAMETERS.get(route.path, ()))
        if path_names or query_names:
            found.extend((method, route.path, path_names, query_names) for method in route.methods)
    return found


def test_no_path_or_query_parameter_makes_a_server_error(database_url, simulator):
    item_id = str(uuid.uuid4())
    with service(database_url, simulator, local_user="dev-user") as (client, app):
        routes = routes_with_parameters(app)
        valid = {"name": "triage", "item_id": item_id}
        failures = [
            f"GET /ui/static/{value}: {status}"
            for value in ("%00", "a%00.css", "%01", "%FF", "a" * 5000)
            if (status := client.get(f"/ui/static/{value}").status_code) >= 500
        ]
        refused_without_naming = []
        for method, path, path_names, query_names in routes:
            body = {"work_item_id": item_id} if method == "POST" and "queues" in path else None
            for parameter in [*path_names, *query_names]:
                for kind, value in (REFUSED_TEXT | ODD_BUT_PRINTABLE).items():
                    target = path
                    for name in path_names:
                        target = target.replace(
                            "{" + name + "}", value if name == parameter else valid[name]
                        )
                    if parameter in query_names:
                        target += f"?{parameter}={value}"
                    headers = {"HX-Request": "true", "Sec-Fetch-Site": "same-origin"}
                    answer = client.request(method, target, json=body, headers=headers)
                    where = f"{method} {path} {parameter}={kind}"
                    if answer.status_code >= 500:
                        failures.append(f"{where}: {answer.status_code} {answer.text[:200]}")
                    if kind in REFUSED_TEXT and answer.status_code != 422:
                        refused_without_naming.append(f"{where}: {answer.status_code}")
                    elif kind in REFUSED_TEXT and path.startswith("/api/"):
                        location = "path" if parameter in path_names else "query"
                        locations = [entry["loc"] for entry in answer.json()["detail"]]
                        if [location, parameter] not in locations:
                            refused_without_naming.append(f"{where}: {locations}")
    assert len(routes) >= 10
    assert failures == [], "\n".join(failures)
    assert refused_without_naming == [], "\n".join(refused_without_naming)


# --- (b) ambiguous credentials -----------------------------------------------------------


def test_two_authorization_headers_are_400_whatever_their_order(
    database_url, simulator, issuer, key
):
    valid = reader_token(issuer, key)["Authorization"]
    with service(database_url, simulator, issuer=issuer) as (client, _):
        assert client.get("/api/work-items", headers={"Authorization": valid}).status_code == 200
        answers = [
            client.get("/api/work-items", headers=[("Authorization", a), ("Authorization", b)])
            for a, b in ((valid, "Bearer wrong"), ("Bearer wrong", valid), (valid, valid))
        ]
        dashboard = client.get("/ui/", headers=[("Authorization", valid), ("Authorization", valid)])
    assert [answer.status_code for answer in answers] == [400, 400, 400]
    assert answers[0].json() == {"detail": "more than one Authorization header"}
    assert dashboard.status_code == 400


def test_two_authorization_headers_with_a_pending_body_are_400(
    database_url, simulator, issuer, key
):
    valid = reader_token(issuer, key)["Authorization"]
    with service(database_url, simulator, issuer=issuer) as (client, _):
        answer = send_partial(
            str(client.base_url),
            "POST",
            "/api/work-items/mr",
            headers={"Authorization": valid, "authorization": valid, "Content-Length": "100000"},
            timeout=10,
        )
    assert answer.status == 400
    assert answer.closed


def test_two_forwarded_access_tokens_on_me_are_400(database_url, simulator):
    with service(database_url, simulator) as (client, _):
        one = client.get("/api/work-items/me", headers={"X-Forwarded-Access-Token": "sha256~a"})
        two = client.get(
            "/api/work-items/me",
            headers=[("X-Forwarded-Access-Token", "sha256~a"), ("X-Forwarded-Access-Token", "b")],
        )
    assert one.status_code == 200
    assert two.status_code == 400


def test_two_webhook_tokens_are_refused_and_store_nothing(database_url, simulator, sessions):
    with service(database_url, simulator) as (client, _):
        answers = [
            client.post(
                WEBHOOK_PATH, content=HOOK, headers=[("X-Gitlab-Token", a), ("X-Gitlab-Token", b)]
            )
            for a, b in ((SECRET, "wrong"), ("wrong", SECRET), (SECRET, SECRET))
        ]
    # 401 as for any other token that is not exactly the secret (test_attack_webhook_fast_path).
    assert [answer.status_code for answer in answers] == [401, 401, 401]
    with sessions() as session:
        assert session.execute(sa.text("SELECT count(*) FROM received_deliveries")).scalar() == 0


# --- (c) Cache-Control: no-store on every /api/ answer -----------------------------------


def test_every_api_answer_says_no_store(database_url, simulator, issuer, key):
    token = reader_token(issuer, key)
    with service(database_url, simulator, issuer=issuer) as (client, _):
        base = str(client.base_url)
        answers = {
            "me": client.get(
                "/api/work-items/me", headers={"X-Forwarded-Access-Token": "sha256~t"}
            ),
            "me without proxy": client.get("/api/work-items/me"),
            "list": client.get("/api/work-items", headers=token),
            "unknown item": client.get(f"/api/work-items/{uuid.uuid4()}", headers=token),
            "invalid query": client.get("/api/work-items?limit=0", headers=token),
            "no route": client.get("/api/nothing-here", headers=token),
            "wrong method": client.delete("/api/work-items", headers=token),
            "no token": client.get("/api/work-items"),
            "bad token": client.get("/api/work-items", headers={"Authorization": "Bearer x"}),
            "webhook": client.post(WEBHOOK_PATH, content=HOOK, headers={"X-Gitlab-Token": SECRET}),
            "webhook no token": client.post(WEBHOOK_PATH, content=HOOK),
            "webhook not JSON": client.post(
                WEBHOOK_PATH, content=b"[", headers={"X-Gitlab-Token": SECRET}
            ),
        }
        early = {
            "401 before the body": send_partial(
                base, "POST", "/api/work-items/mr", headers={"Content-Length": "5000"}
            ),
            "413 announced": send_partial(
                base,
                "POST",
                WEBHOOK_PATH,
                headers={"X-Gitlab-Token": SECRET, "Content-Length": str(2 * 1024 * 1024)},
            ),
        }
        dashboard = client.get("/ui/")
        static = client.get("/ui/static/dashboard.css")
    assert answers["me"].status_code == 200
    assert answers["me"].json() == {"token": "sha256~t"}
    cache = {name: answer.headers.get("cache-control") for name, answer in answers.items()}
    assert cache == dict.fromkeys(answers, "no-store")
    early_cache = {name: answer.headers.get("cache-control") for name, answer in early.items()}
    assert early_cache == dict.fromkeys(early, "no-store")
    assert [answer.status for answer in early.values()] == [401, 413]
    # The dashboard keeps its own headers; its static files stay cacheable.
    assert dashboard.headers.get("cache-control") == "no-store"
    assert static.status_code == 200
    assert "cache-control" not in static.headers


# --- (d) failed authentications ----------------------------------------------------------


def test_a_refused_openshift_token_is_looked_up_once(database_url, simulator, openshift):
    with service(database_url, simulator, openshift=openshift) as (client, _):
        statuses = [
            client.get(
                "/api/work-items", headers={"Authorization": "Bearer sha256~bogus"}
            ).status_code
            for _ in range(5)
        ]
    assert statuses == [401] * 5
    assert openshift.user_hits == 1


def test_more_than_30_failed_authentications_from_one_address_answer_429(
    database_url, simulator, openshift, issuer, key
):
    openshift.users["sha256~alice-cached"] = ("alice", ["devs"])
    openshift.users["sha256~bob-new"] = ("bob", ["devs"])
    stranger = rsa_key("stranger")
    jwt_reader = reader_token(issuer, key)
    with service(database_url, simulator, openshift=openshift, issuer=issuer) as (client, _):
        # Both are checked (and cached) before the attack.
        alice = {"Authorization": "Bearer sha256~alice-cached"}
        assert client.get("/api/work-items", headers=alice).status_code == 200
        assert client.get("/api/work-items", headers=jwt_reader).status_code == 200
        hits_before = openshift.user_hits
        bogus: list[dict[str, str]] = []
        for n in range(10):
            bogus.append({"Authorization": f"Bearer sha256~bogus-{n}"})  # OpenShift refuses
            forged = sign(claims_for(issuer.issuer, sub=READER), stranger, kid=key.kid)
            bogus.append({"Authorization": f"Bearer {forged}"})  # a signature that fails
            bogus.append({"Authorization": f"Basic {n}"})  # not even a bearer token
        statuses = [client.get("/api/work-items", headers=headers).status_code for headers in bogus]
        assert statuses == [401] * 30
        assert openshift.user_hits == hits_before + 10

        over = client.get("/api/work-items", headers={"Authorization": "Bearer sha256~bogus-x"})
        dashboard = client.get("/ui/", headers={"Authorization": "Bearer sha256~bogus-y"})
        new_user = client.get("/api/work-items", headers={"Authorization": "Bearer sha256~bob-new"})
        # Callers whose tokens check without any outbound call are still served.
        still_alice = client.get("/api/work-items", headers=alice)
        still_jwt = client.get("/api/work-items", headers=jwt_reader)
        elsewhere = client.get(
            "/api/work-items",
            headers={"Authorization": "Bearer sha256~bogus-z", "X-Forwarded-For": "192.0.2.7"},
        )
    assert over.status_code == 429
    assert 1 <= int(over.headers["retry-after"]) <= 60
    assert "failed authentications" in over.json()["detail"]
    assert dashboard.status_code == 429
    assert 1 <= int(dashboard.headers["retry-after"]) <= 60
    assert new_user.status_code == 429
    assert (still_alice.status_code, still_jwt.status_code) == (200, 200)
    # No outbound call for anything refused over the budget; another address has its own.
    assert elsewhere.status_code == 401
    assert openshift.user_hits == hits_before + 10 + 1


def test_the_budget_is_per_address_not_per_token(database_url, simulator, issuer, key):
    with service(database_url, simulator, issuer=issuer) as (client, _):
        one = {"X-Forwarded-For": "203.0.113.9"}
        # Requests without any credential cost nothing to refuse and do not count.
        without = {client.get("/api/work-items", headers=one).status_code for _ in range(40)}
        for n in range(30):
            address = {"X-Forwarded-For": f"198.51.100.{n}"}
            answer = client.get("/api/work-items", headers=address | {"Authorization": "Bearer x"})
            assert answer.status_code == 401
        from_one = [
            client.get(
                "/api/work-items",
                headers=one | {"Authorization": f"Bearer x{n}"},
            ).status_code
            for n in range(31)
        ]
        elsewhere = client.get("/api/work-items", headers=reader_token(issuer, key))
    assert without == {401}
    assert from_one == [401] * 30 + [429]
    assert elsewhere.status_code == 200


def test_an_ipv6_client_is_counted_by_its_64_prefix(database_url, simulator):
    with service(database_url, simulator) as (client, _):
        statuses = [
            client.get(
                "/api/work-items",
                headers={"X-Forwarded-For": f"2001:db8:1:2::{n:x}", "Authorization": "Bearer x"},
            ).status_code
            for n in range(31)
        ]
    assert statuses == [401] * 30 + [429]


def test_the_429_leaves_by_the_same_doors_as_a_401(database_url, simulator):
    with service(database_url, simulator) as (client, _):
        for n in range(30):
            client.get("/api/work-items", headers={"Authorization": f"Bearer y{n}"})
        answer = send_partial(
            str(client.base_url),
            "POST",
            "/api/work-items/mr",
            headers={"Authorization": "Bearer y", "Content-Length": "5000"},
        )
    assert answer.status == 429
    assert answer.headers["cache-control"] == "no-store"
    assert "retry-after" in answer.headers
    assert answer.closed
