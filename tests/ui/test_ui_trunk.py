"""The trunk queues page, with the service handling `trunk` items: scoped like the API."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from api_harness import build_client
from scoping_support import OWN, VICTIM, scoped_rules


@pytest.fixture
def trunk_client(database_url, simulator, issuer) -> Iterator[httpx.Client]:
    section = {
        "gitlab_url": simulator.url,
        "queues": [{"project": OWN, "branch": "main"}, {"project": VICTIM, "branch": "main"}],
    }
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        handled_types={"trunk": section},
        process_items=False,
    ) as client:
        yield client


def test_trunk_queues_show_their_heads_to_those_who_may_read_them(
    trunk_client, simulator, admin, reader
):
    sha = simulator.branch_head(OWN, "main")
    head = trunk_client.post(
        "/api/work-items/trunk", json={"project": OWN, "branch": "main", "sha": sha}, headers=admin
    )
    assert head.status_code == 201, head.text
    item = head.json()["id"]

    page = trunk_client.get("/ui/trunk", headers=admin)
    assert page.status_code == 200
    assert '<a href="/ui/trunk">Trunk queues</a>' in page.text
    rows = re.findall(r"<tr>\s*<td>([^<]+:main)</td>", page.text)
    assert rows == [f"{OWN}:main", f"{VICTIM}:main"]
    assert f'href="/ui/items/{item}">{item[:8]}</a>' in page.text
    assert "0 / 1" in page.text

    as_reader = trunk_client.get("/ui/trunk", headers=reader).text
    assert re.findall(r"<tr>\s*<td>([^<]+:main)</td>", as_reader) == [f"{OWN}:main"]

    listed = trunk_client.get("/ui/?type=trunk", headers=admin).text
    assert f'data-item="{item}"' in listed
    assert f"{OWN}:main" in listed  # the queue stands in for a branch
    assert sha in listed  # the head's commit stands in for a title
