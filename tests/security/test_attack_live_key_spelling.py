"""Attack (fixed): the live key and ownership used the project *as spelled by the caller*.

`live_key` / `find_live_item` / `lock_identity` key on `submission.project`
verbatim, but GitLab accepts several spellings of one project: its numeric id
and any letter case of its path. A second caller that spells the same project
differently gets a second live item for the same GitLab branch (201 instead
of the documented 409), i.e. both "one live item per branch" and "a live item
is updated only by the caller that created it" are bypassed.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_harness import build_client
from scoping_support import ADMIN_SUB, OTHER_BOT, OWN, ci_job, scoped_rules, submission, token


@pytest.fixture
def client(database_url, simulator, issuer, projects) -> Iterator[httpx.Client]:
    del projects
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        process_items=False,
    ) as test_client:
        yield test_client


def _live_items_for_branch(client, headers, branch):
    items = client.get("/api/work-items/mr", params={"limit": 200}, headers=headers).json()["items"]
    return [
        i
        for i in items
        if i["details"]["source_branch"] == branch and i["phase"] in {"active", "failed"}
    ]


def test_numeric_id_lets_a_second_ci_job_bypass_ownership_409(client, issuer, key, projects):
    """Two CI jobs of the same project (different refs, so different `sub`)."""
    job_a = ci_job(issuer, key, ref="main")
    job_b = ci_job(issuer, key, ref="feature")
    created = client.post("/api/work-items/mr", json=submission(OWN), headers=job_a)
    assert created.status_code == 201, created.text
    # Same spelling: correctly refused.
    assert client.post("/api/work-items/mr", json=submission(OWN), headers=job_b).status_code == 409
    # Same project by id: must be refused the same way.
    by_id = client.post(
        "/api/work-items/mr", json=submission(str(projects[OWN]), title="B"), headers=job_b
    )
    admin = token(issuer, key, ADMIN_SUB)
    live = _live_items_for_branch(client, admin, "workqueue/sync")
    assert by_id.status_code == 409, by_id.text
    assert len(live) == 1, live


def test_path_case_variant_bypasses_ownership_409(client, issuer, key):
    admin, other = token(issuer, key, ADMIN_SUB), token(issuer, key, OTHER_BOT)
    created = client.post("/api/work-items/mr", json=submission(OWN), headers=admin)
    assert created.status_code == 201, created.text
    assert client.post("/api/work-items/mr", json=submission(OWN), headers=other).status_code == 409
    # GitLab resolves paths case-insensitively: Team/App *is* team/app.
    shouted = client.post("/api/work-items/mr", json=submission("Team/APP"), headers=other)
    live = _live_items_for_branch(client, admin, "workqueue/sync")
    assert shouted.status_code == 409, shouted.text
    assert len(live) == 1, live
