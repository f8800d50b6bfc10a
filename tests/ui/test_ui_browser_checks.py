"""External checks in a real browser (Debian's Chromium through Playwright): a merged item
waiting for its builds shows each component with its link; a build reported meanwhile
appears without a reload, and the item completes on the page."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from api_harness import build_client
from dashboard_support import submitted
from harness import wait_until
from playwright.sync_api import expect
from scoping_support import ADMIN_SUB, OWN, scoped_rules, token

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

HOOK_SECRET = "hook-secret"
REPORTER = "system:serviceaccount:konflux:reporter"
LOGS = "https://konflux.example/ns/team/pipelinerun/"


@pytest.fixture
def service(database_url, simulator, issuer) -> Iterator[httpx.Client]:
    reporter = {
        "issuer": issuer.issuer,
        "claims": {"aud": "workqueue-service", "sub": REPORTER},
        "permissions": ["report"],
        "projects": [OWN],
    }
    checks = {"after_merge": [{"name": "build", "variants": ["api", "worker"]}]}
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=(*scoped_rules(issuer.issuer), reporter),
        handled_types={"mr": {"gitlab_url": simulator.url, "checks": checks}},
        webhook_secret=HOOK_SECRET,
    ) as client:
        yield client


def test_the_item_page_follows_the_builds_after_the_merge(
    browser, service, simulator: GitLabSimulator, issuer, key, tmp_path: Path
):
    admin = token(issuer, key, ADMIN_SUB)
    item = submitted(service, admin, OWN)

    def details() -> dict[str, object]:
        return service.get(f"/api/work-items/{item}", headers=admin).json()["details"]

    wait_until(lambda: details().get("mr_iid") is not None, what="the MR")
    pipeline = simulator.create_pipeline(
        OWN, merge_request_iid=details()["mr_iid"], jobs=[JobSpec("unit", status="success")]
    )
    hook = simulator.pipeline_hook(pipeline)
    headers = {"X-Gitlab-Event": "Pipeline Hook", "X-Gitlab-Token": HOOK_SECRET}
    assert service.post("/api/webhooks/gitlab", json=hook, headers=headers).status_code == 200
    wait_until(lambda: details().get("post_merge") is not None, what="merged, waiting")
    merge_sha = details()["post_merge"]["merge_commit_sha"]

    def report(variant: str, status: str) -> None:
        answer = service.post(
            "/api/signals",
            json={
                "project": OWN,
                "sha": merge_sha,
                "name": "build",
                "variant": variant,
                "status": status,
                "url": f"{LOGS}{variant}",
            },
            headers=token(issuer, key, REPORTER),
        )
        assert answer.status_code == 202, answer.text

    report("api", "success")
    base = str(service.base_url).rstrip("/")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{base}/ui/")
    page.fill("#token", admin["Authorization"].removeprefix("Bearer "))
    page.click("#token-form button[type=submit]")
    expect(page.locator("#who")).to_contain_text(ADMIN_SUB)
    page.goto(f"{base}/ui/items/{item}")

    panel = page.locator("section.checks")
    expect(panel).to_contain_text("build / api")
    link = panel.locator("a", has_text="build / api")
    expect(link).to_have_attribute("href", f"{LOGS}api")
    expect(link).to_have_attribute("rel", "noreferrer noopener")
    worker = panel.locator("tr", has_text="build / worker")
    expect(worker).to_contain_text("pending")
    expect(worker).to_contain_text("awaited")
    expect(page.locator("#item-phase")).to_have_text("active")
    target = Path(os.environ.get("WORKQUEUE_UI_SCREENSHOTS") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=target / "dashboard-item-checks.png", full_page=True)

    # Reported meanwhile: the live refresh shows it, no reload.
    report("worker", "success")
    expect(worker).to_contain_text("success", timeout=20_000)
    expect(page.locator("#item-phase")).to_have_text("completed", timeout=20_000)
    assert errors == []
    context.close()
