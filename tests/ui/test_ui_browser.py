"""The dashboard in a real browser: headless Chromium (Debian's package) driven by Playwright.

list → filter → open an item → retry → see it change; a reader's retry is a
403 page; no console errors and no request to anything but the service.
The browser is never downloaded: Playwright drives the system's `chromium`
(installed by `.ci/run`); without it this test fails, it does not skip.

Set WORKQUEUE_UI_SCREENSHOTS=docs/images to refresh the documentation's screenshots.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from api_harness import build_client
from dashboard_support import submitted
from playwright.sync_api import (
    ConsoleMessage,
    Page,
    Request,
    Route,
    expect,
)
from scoping_support import OWN, scoped_rules

SCREENSHOT_SIZE = {"width": 1280, "height": 800}


@pytest.fixture
def service(database_url, simulator, issuer) -> Iterator[httpx.Client]:
    """The whole service, processing items against the simulator, over real HTTP."""
    with build_client(
        database_url, simulator, local_user=None, rules=scoped_rules(issuer.issuer)
    ) as client:
        yield client


# Chromium's own line for every answer >= 400, page script or not.
REFUSED_LOAD = re.compile(r"Failed to load resource: the server responded with a status of (\d+)")


class Watched:
    """A page whose console errors and request destinations are recorded.

    Chromium logs each 4xx answer as a console error by itself; those are kept
    apart (`refused_loads`, with their URLs) so the test can require exactly
    the refusals it provokes and no other console error at all.
    """

    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.origin = urlsplit(base_url).netloc
        self.console_errors: list[str] = []
        self.refused_loads: list[tuple[int, str]] = []
        self.requests: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.console_errors.append(f"pageerror: {error}"))
        page.context.route("**/*", self._route)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type not in {"error", "warning"}:
            return
        refused = REFUSED_LOAD.match(message.text)
        if refused is not None:
            self.refused_loads.append((int(refused.group(1)), message.location["url"]))
        else:
            self.console_errors.append(f"{message.type}: {message.text} @ {message.location}")

    def _route(self, route: Route, request: Request) -> None:
        self.requests.append(request.url)
        if urlsplit(request.url).netloc != self.origin:
            route.abort()  # recorded above: the assertion names it
            return
        route.continue_()

    def foreign_requests(self) -> list[str]:
        return [url for url in self.requests if urlsplit(url).netloc != self.origin]


def screenshot(page: Page, name: str, tmp_path: Path, *, full_page: bool = False) -> None:
    target = Path(os.environ.get("WORKQUEUE_UI_SCREENSHOTS") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=target / f"dashboard-{name}.png", full_page=full_page)


def sign_in(page: Page, authorization: dict[str, str]) -> None:
    page.fill("#token", authorization["Authorization"].removeprefix("Bearer "))
    page.click("#token-form button[type=submit]")


def bare(authorization: dict[str, str]) -> str:
    return authorization["Authorization"].removeprefix("Bearer ")


def use_token(page: Page, authorization: dict[str, str]) -> None:
    """Put a token in the tab's storage, as a second person in the same tab would."""
    page.evaluate(
        "token => sessionStorage.setItem('workqueue-service.token', token)", bare(authorization)
    )


def test_an_operator_filters_opens_and_retries_and_a_reader_is_refused(
    browser, service, admin, reader, tmp_path
):
    base = str(service.base_url).rstrip("/")
    parked = submitted(service, admin, OWN, source_branch="workqueue/parked", auto_merge=False)
    stopped = submitted(service, admin, OWN, source_branch="workqueue/stopped", title="Bump kernel")
    other = submitted(service, admin, OWN, source_branch="workqueue/third", title="Third item")
    for item in (stopped, other):
        assert service.post(f"/api/work-items/{item}/cancel", headers=admin).status_code == 200

    context = browser.new_context(viewport=SCREENSHOT_SIZE)
    page = context.new_page()
    watched = Watched(page, base)

    sign_in_with_a_pasted_token(page, base, admin, tmp_path)
    assert context.cookies() == []
    filter_open_and_retry(page, parked, stopped, tmp_path)
    a_reader_sees_no_buttons_and_is_refused(page, base, other, admin, reader, tmp_path)
    assert service.get(f"/api/work-items/{other}", headers=admin).json()["phase"] == "cancelled"

    # The API docs load from the service too.
    page.goto(f"{base}/docs")
    expect(page.locator(".swagger-ui .title").first).to_contain_text("workqueue-service")
    page.goto(f"{base}/redoc")
    expect(page.locator("h1").first).to_contain_text("workqueue-service")

    assert watched.foreign_requests() == []
    assert any(url.endswith("/ui/static/vendor/htmx-2.0.11.min.js") for url in watched.requests)
    assert watched.console_errors == []
    assert watched.refused_loads == [(403, f"{base}/ui/items/{other}/retry")]
    context.close()


def sign_in_with_a_pasted_token(page: Page, base: str, admin, tmp_path: Path) -> None:
    page.goto(f"{base}/ui/")
    expect(page.locator("[data-sign-in] h1")).to_have_text("Sign in")
    screenshot(page, "sign-in", tmp_path)
    sign_in(page, admin)
    expect(page.locator("#who")).to_contain_text("system:serviceaccount:ops:admin")
    expect(page.locator("#items-table tbody tr[data-item]")).to_have_count(3)
    assert bare(admin) not in page.url
    assert page.evaluate("sessionStorage.getItem('workqueue-service.token')") == bare(admin)


def filter_open_and_retry(page: Page, parked: str, stopped: str, tmp_path: Path) -> None:
    rows = page.locator("#items-table tbody tr[data-item]")
    # The parked item waits for a person: live refresh brings its blocker into the list.
    expect(page.locator(f'tr[data-item="{parked}"] td.problem')).to_contain_text(
        "auto", timeout=20_000
    )
    screenshot(page, "items", tmp_path)

    page.select_option("select[name=phase]", "cancelled")
    page.click("form.filters button[type=submit]")
    expect(rows).to_have_count(2)
    assert "phase=cancelled" in page.url
    expect(page.locator(f'tr[data-item="{parked}"]')).to_have_count(0)

    page.click(f'tr[data-item="{stopped}"] a[href="/ui/items/{stopped}"]')
    expect(page.locator("#item-phase")).to_have_text("cancelled")
    expect(page.locator("ol.timeline")).to_contain_text("item_cancelled", timeout=20_000)
    page.click("button:has-text('Retry')")
    expect(page.locator(".notice")).to_contain_text("Retried")
    expect(page.locator("#item-phase")).not_to_have_text("cancelled")
    # API routes' audit entries reach the history through a background writer:
    # the live refresh shows the retry's entry once it is stored.
    expect(page.locator("ol.timeline")).to_contain_text("item_retried", timeout=20_000)
    screenshot(page, "item", tmp_path, full_page=True)

    page.click("nav a:has-text('Attention queues')")
    expect(page.locator("#queues-table")).to_contain_text("needs-human")
    screenshot(page, "queues", tmp_path)


def a_reader_sees_no_buttons_and_is_refused(
    page: Page, base: str, item: str, admin, reader, tmp_path: Path
) -> None:
    page.goto(f"{base}/ui/items/{item}")
    expect(page.locator("#item-phase")).to_have_text("cancelled")
    page.click("#forget-token")
    expect(page.locator("[data-sign-in]")).to_be_visible()
    sign_in(page, reader)
    expect(page.locator("#who")).to_contain_text("system:serviceaccount:team:reader")
    expect(page.locator("#item-phase")).to_have_text("cancelled")
    expect(page.locator("button:has-text('Retry')")).to_have_count(0)

    # A button rendered for someone else (a stale page) answers the reader with a 403 page.
    use_token(page, admin)
    page.reload()
    expect(page.locator("button:has-text('Retry')")).to_be_visible()
    use_token(page, reader)
    page.click("button:has-text('Retry')")
    expect(page.locator(".refusal h1")).to_have_text("403 · Forbidden")
    expect(page.locator(".refusal")).to_contain_text("may not retry mr items in project team/app")
    screenshot(page, "forbidden", tmp_path)


def test_a_browser_signs_in_with_its_oauth_proxy_session(browser, service, reader):
    """The proxy guards only `/api/work-items/me`, adding the session's token to it."""
    base = str(service.base_url).rstrip("/")
    context = browser.new_context()
    page = context.new_page()
    watched = Watched(page, base)

    def as_the_proxy(route: Route, request: Request) -> None:
        watched.requests.append(request.url)
        route.continue_(headers={**request.headers, "x-forwarded-access-token": bare(reader)})

    page.route("**/api/work-items/me", as_the_proxy)
    page.goto(f"{base}/ui/")
    page.click("[data-proxy-sign-in]")
    expect(page.locator("#who")).to_contain_text("system:serviceaccount:team:reader")
    expect(page.locator("#items-table")).to_contain_text("No items match")
    assert page.evaluate("sessionStorage.getItem('workqueue-service.token')") == bare(reader)
    page.click("nav a:has-text('Attention queues')")  # later pages send it as a header
    expect(page.locator("#queues-table")).to_contain_text("needs-human")
    assert watched.foreign_requests() == []
    assert watched.console_errors == []
    assert watched.refused_loads == []
    context.close()
