"""The dashboard in process: rendering, filters, scoping, refusals, headers, escaping.

Real PostgreSQL, the GitLab simulator, real tokens from a local OIDC issuer;
the app is served over HTTP by uvicorn in a thread (as the API tests do).
"""

from __future__ import annotations

import json
import re

import sqlalchemy as sa
from api_harness import LOCAL_USER, build_client
from dashboard_support import DASHBOARD_POST, submitted
from harness import wait_until
from scoping_support import OWN, VICTIM

from workqueue.ui.browser_guard import CONTENT_SECURITY_POLICY


def phase_of(client, item_id, headers):
    return client.get(f"/api/work-items/{item_id}", headers=headers).json()["phase"]


def listed_ids(html: str) -> set[str]:
    return set(re.findall(r'data-item="([0-9a-f-]{36})"', html))


def test_root_and_bare_ui_redirect_to_the_dashboard(client):
    for path in ("/", "/ui"):
        answer = client.get(path, follow_redirects=False)
        assert answer.status_code == 307
        assert answer.headers["location"] == "/ui/"


def test_every_dashboard_answer_carries_the_browser_protections(client, admin):
    for path, headers in (
        ("/ui/", admin),
        ("/ui/", {}),  # the sign-in page
        ("/ui/items/not-an-id", admin),  # an error page
        ("/ui/static/dashboard.js", {}),
    ):
        answer = client.get(path, headers=headers)
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert answer.headers["x-frame-options"] == "DENY"
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
    assert "unsafe" not in CONTENT_SECURITY_POLICY
    assert client.get("/ui/", headers=admin).headers["cache-control"] == "no-store"
    assert "no-store" not in client.get("/ui/static/dashboard.css").headers.get("cache-control", "")
    # The API itself keeps its own headers.
    assert "content-security-policy" not in client.get("/healthz").headers


def test_pages_load_no_inline_script_and_only_own_assets(client, admin):
    html = client.get("/ui/", headers=admin).text
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, flags=re.DOTALL)
    assert scripts, html
    for attributes, body in scripts:
        assert body.strip() == ""
        assert 'src="/ui/static/' in attributes
    assert "<style" not in html
    assert " style=" not in html
    assert not re.search(r"""(src|href)="(https?:)?//""", html)
    for asset in re.findall(r'(?:src|href)="(/ui/static/[^"]+)"', html):
        assert client.get(asset).status_code == 200, asset


def test_without_credentials_the_page_asks_for_a_token(client, admin):
    # Opening a page: the frame whose script sends the tab's token, or asks for one.
    answer = client.get("/ui/")
    assert answer.status_code == 200
    assert "data-sign-in" in answer.text
    assert "data-rejected" not in answer.text
    assert 'type="password"' in answer.text
    assert 'id="items-table"' not in answer.text
    # The page's own requests without a token are refused.
    fragment = client.get("/ui/", headers={"HX-Request": "true"})
    assert fragment.status_code == 401
    assert "data-sign-in" in fragment.text
    refused = client.get("/ui/", headers={"Authorization": "Bearer not-a-token"})
    assert refused.status_code == 401
    assert "data-rejected" in refused.text
    assert "not-a-token" not in refused.text


def test_the_proxy_forwarded_token_is_verified_like_a_bearer_token(client, admin, reader):
    forwarded = {"X-Forwarded-Access-Token": reader["Authorization"].removeprefix("Bearer ")}
    answer = client.get("/ui/", headers=forwarded)
    assert answer.status_code == 200
    assert "system:serviceaccount:team:reader" in answer.text
    forged = client.get("/ui/", headers={"X-Forwarded-Access-Token": "forged"})
    assert forged.status_code == 401
    # An Authorization header wins over the forwarded one.
    both = client.get("/ui/", headers={**forwarded, **admin})
    assert "system:serviceaccount:ops:admin" in both.text


def test_the_list_filters_by_type_phase_project_and_queue(client, admin):
    own = submitted(client, admin, OWN)
    victim = submitted(client, admin, VICTIM)
    cancelled = submitted(client, admin, OWN, source_branch="workqueue/other")
    assert client.post(f"/api/work-items/{cancelled}/cancel", headers=admin).status_code == 200
    added = client.post(
        "/api/queues/needs-human/items", json={"work_item_id": victim}, headers=admin
    )
    assert added.status_code == 201

    def shown(query: str) -> set[str]:
        answer = client.get(f"/ui/?{query}", headers=admin)
        assert answer.status_code == 200, answer.text
        return listed_ids(answer.text)

    assert shown("") == {own, victim, cancelled}
    assert shown("type=mr&phase=&project=&queue=") == {own, victim, cancelled}
    assert shown("phase=cancelled") == {cancelled}
    assert shown("phase=active") == {own, victim}
    assert shown(f"project={OWN}") == {own, cancelled}
    assert shown(f"project={OWN}&phase=active") == {own}
    assert shown("queue=needs-human") == {victim}
    assert shown("type=trunk") == set()
    # The chosen filters stay selected in the form.
    html = client.get("/ui/?phase=cancelled&queue=needs-human", headers=admin).text
    assert '<option value="cancelled" selected>' in html
    assert '<option value="needs-human" selected>' in html


def test_bad_filters_are_clear_pages_not_tracebacks(client, admin):
    for query, status, text in (
        ("phase=sleeping", 422, "unknown phase"),
        ("queue=nope", 404, "no queue nope"),
        ("cursor=garbage", 422, "cursor is not valid"),
        ("project=" + "x" * 2000, 422, "at most 1024"),
        ("project=%00", 422, "no control characters"),
        ("project=a%01b", 422, "no control characters"),
    ):
        answer = client.get(f"/ui/?{query}", headers=admin)
        assert answer.status_code == status, (query, answer.text)
        assert text in answer.text
        assert answer.headers["content-type"].startswith("text/html")
    missing = client.get("/ui/items/00000000-0000-0000-0000-000000000000", headers=admin)
    assert missing.status_code == 404
    assert client.get("/ui/items/not-an-id", headers=admin).status_code == 404


def test_a_reader_sees_only_its_projects_and_no_buttons(client, admin, reader):
    own = submitted(client, admin, OWN)
    victim = submitted(client, admin, VICTIM)
    assert client.post(f"/api/work-items/{own}/cancel", headers=admin).status_code == 200

    assert listed_ids(client.get("/ui/", headers=reader).text) == {own}
    assert listed_ids(client.get(f"/ui/?project={VICTIM}", headers=reader).text) == set()
    hidden = client.get(f"/ui/items/{victim}", headers=reader)
    assert hidden.status_code == 403
    assert "may not read mr items in project" in hidden.text

    page = client.get(f"/ui/items/{own}", headers=reader)
    assert page.status_code == 200
    assert "/retry" not in page.text
    assert "/cancel" not in page.text
    admin_page = client.get(f"/ui/items/{own}", headers=admin).text
    assert f'hx-post="/ui/items/{own}/retry"' in admin_page
    assert "/cancel" not in admin_page  # cancelled already: only retry applies


def test_a_reader_retrying_gets_a_403_page_and_nothing_changes(client, admin, reader):
    item = submitted(client, admin, OWN)
    assert client.post(f"/api/work-items/{item}/cancel", headers=admin).status_code == 200
    refused = client.post(f"/ui/items/{item}/retry", headers={**reader, **DASHBOARD_POST})
    assert refused.status_code == 403
    assert "may not retry mr items in project team/app" in refused.text
    assert "<html" not in refused.text  # a fragment for the page's content area
    assert phase_of(client, item, admin) == "cancelled"
    refused_cancel = client.post(f"/ui/items/{item}/cancel", headers={**reader, **DASHBOARD_POST})
    assert refused_cancel.status_code == 403


def test_retry_and_cancel_from_the_dashboard(client, admin):
    item = submitted(client, admin, OWN)
    cancelled = client.post(f"/ui/items/{item}/cancel", headers={**admin, **DASHBOARD_POST})
    assert cancelled.status_code == 200, cancelled.text
    assert "Cancelled." in cancelled.text
    assert phase_of(client, item, admin) == "cancelled"
    again = client.post(f"/ui/items/{item}/cancel", headers={**admin, **DASHBOARD_POST})
    assert again.status_code == 409
    assert "it cannot be cancelled" in again.text

    retried = client.post(f"/ui/items/{item}/retry", headers={**admin, **DASHBOARD_POST})
    assert retried.status_code == 200, retried.text
    assert "Retried: the item is active again." in retried.text
    assert phase_of(client, item, admin) == "active"

    # Both are audited under the caller's name (stored by the history's background writer).
    def audited() -> set[tuple[str, str]]:
        history = client.get(f"/api/work-items/{item}/history", headers=admin).json()["items"]
        return {(entry["event_type"], entry["actor"]) for entry in history}

    admin_sub = "system:serviceaccount:ops:admin"
    expected = {("item_retried", admin_sub), ("item_cancelled", admin_sub)}
    wait_until(lambda: expected <= audited(), what="the retry and cancel in the history")


def test_mutations_from_other_sites_are_refused(client, admin):
    item = submitted(client, admin, OWN)
    path = f"/ui/items/{item}/cancel"
    for headers in (
        admin,  # a plain form post: no HX-Request
        {**admin, "HX-Request": "true", "Sec-Fetch-Site": "cross-site"},
        {**admin, "HX-Request": "true", "Sec-Fetch-Site": "same-site"},
        {**admin, "HX-Request": "true", "Origin": "http://evil.example"},
    ):
        refused = client.post(path, headers=headers)
        assert refused.status_code == 403, headers
        assert "refused" in refused.text
    assert phase_of(client, item, admin) == "active"
    assert client.get(path, headers=admin).status_code == 405  # never by GET
    origin = str(client.base_url).rstrip("/")
    same = client.post(path, headers={**admin, "HX-Request": "true", "Origin": origin})
    assert same.status_code == 200, same.text
    assert phase_of(client, item, admin) == "cancelled"


def test_caller_content_is_escaped_and_inert(client, admin):
    title = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    item = submitted(
        client,
        admin,
        OWN,
        title=title,
        description="</pre><script>steal()</script>",
        source_branch="workqueue/<b>bold</b>",
    )
    for path in ("/ui/", f"/ui/items/{item}"):
        html = client.get(path, headers=admin).text
        assert "<script>alert" not in html
        assert "<img src=x" not in html
        assert "<b>bold</b>" not in html
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    page = client.get(f"/ui/items/{item}", headers=admin).text
    assert "&lt;/pre&gt;&lt;script&gt;steal()" in page


def test_the_item_page_shows_state_dimensions_details_and_history(client, admin):
    item = submitted(client, admin, OWN, package="kernel", labels=["bot"])
    # The submission's audit entry is stored by the history's background writer.
    wait_until(
        lambda: "item_submitted" in client.get(f"/ui/items/{item}", headers=admin).text,
        what="the submission in the item's history",
    )
    page = client.get(f"/ui/items/{item}", headers=admin)
    assert page.status_code == 200
    html = page.text
    assert 'id="item-phase">active<' in html
    assert "Sync kernel sources" in html
    assert "workqueue/sync" in html
    assert "<dt>Project</dt><dd>team/app</dd>" in html
    assert "update</span> kernel.spec" in html  # file actions, never their content
    assert "v2\n" not in html
    assert not re.search(r"\bNone\b", html)  # missing values are shown as nothing


def test_the_item_page_lists_external_checks_with_their_links(client, admin, database_url):
    item = submitted(client, admin, OWN)
    post_merge = {
        "merge_commit_sha": "c" * 40,
        "waiting_since": "2026-12-03T10:00:00+00:00",
        "checks": [
            {
                "name": "build",
                "variant": "api",
                "status": "success",
                "url": "https://konflux.example/run/api",
                "updated_at": "2026-12-03T10:01:00+00:00",
            },
            {
                "name": "build",
                "variant": "worker",
                "status": "failed",
                "url": "javascript:alert(1)",
                "updated_at": "2026-12-03T10:02:00+00:00",
            },
            {
                "name": "build",
                "variant": "ui",
                "status": "pending",
                "url": None,
                "updated_at": None,
            },
        ],
    }
    engine = sa.create_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE mr_details SET post_merge = CAST(:pm AS jsonb) WHERE id = :id"),
                {"pm": json.dumps(post_merge), "id": item},
            )
    finally:
        engine.dispose()
    html = client.get(f"/ui/items/{item}", headers=admin).text
    assert "External checks" in html
    assert 'href="https://konflux.example/run/api"' in html
    assert "build / api" in html
    assert 'check-failed">failed<' in html
    assert "javascript:" not in html  # a check's url becomes a link only for http(s)
    assert "awaited" in html  # ui has not reported


def test_live_refresh_requests_get_the_content_without_the_layout(client, admin):
    submitted(client, admin, OWN)
    fragment = client.get("/ui/", headers={**admin, "HX-Request": "true"})
    assert fragment.status_code == 200
    assert "<html" not in fragment.text
    assert 'id="items-table"' in fragment.text
    assert 'id="who" class="who" hx-swap-oob="true"' in fragment.text
    boosted = client.get("/ui/", headers={**admin, "HX-Request": "true", "HX-Boosted": "true"})
    assert "<html" in boosted.text
    assert fragment.headers["vary"] == "HX-Request"


def test_attention_and_trunk_pages(client, admin, reader):
    victim = submitted(client, admin, VICTIM)
    client.post("/api/queues/needs-human/items", json={"work_item_id": victim}, headers=admin)
    queues = client.get("/ui/queues", headers=admin)
    assert queues.status_code == 200
    assert re.search(r'data-queue="needs-human">.*?class="size">1<', queues.text, re.DOTALL)
    # Sizes count only what the caller may read.
    as_reader = client.get("/ui/queues", headers=reader).text
    assert re.search(r'data-queue="needs-human">.*?class="size">0<', as_reader, re.DOTALL)
    # This service handles no trunk items: no link, and the page says so.
    assert "/ui/trunk" not in queues.text
    trunk = client.get("/ui/trunk", headers=admin)
    assert trunk.status_code == 404
    assert "does not handle trunk items" in trunk.text


def test_api_docs_work_offline(client):
    for path, assets in (
        ("/docs", ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png")),
        ("/redoc", ("redoc.js",)),
    ):
        html = client.get(path).text
        assert not re.search(r"""(src|href)=["']https?://""", html), html
        for asset in assets:
            assert f"/api-docs-assets/{asset}" in html
            assert client.get(f"/api-docs-assets/{asset}").status_code == 200
    assert '"validatorUrl": null' in client.get("/docs").text
    # ReDoc's side-menu logo comes from the service, not its vendor's CDN.
    bundle = client.get("/api-docs-assets/redoc.js").text
    assert "cdn.redoc.ly" not in bundle
    assert "/api-docs-assets/favicon.png" in bundle
    assert client.get("/openapi.json").status_code == 200
    assert not any(path.startswith("/ui") for path in client.get("/openapi.json").json()["paths"])


def test_the_local_dev_user_needs_no_token(database_url, simulator):
    with build_client(database_url, simulator, process_items=False) as local:
        item = submitted(local, {}, OWN)
        page = local.get("/ui/")
        assert page.status_code == 200
        assert f"signed in as <strong>{LOCAL_USER}</strong>" in page.text
        assert listed_ids(page.text) == {item}
        assert "/cancel" in local.get(f"/ui/items/{item}").text  # every permission
        cancelled = local.post(f"/ui/items/{item}/cancel", headers=DASHBOARD_POST)
        assert cancelled.status_code == 200
        # Ambient credentials make the cross-site check matter most here.
        retry = f"/ui/items/{item}/retry"
        assert local.post(retry, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
        assert phase_of(local, item, {}) == "cancelled"
