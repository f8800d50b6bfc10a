"""Attack (fixed): a caller with `retry` on a project could take over another caller's MR.

`POST /cancel` needs only the `retry` permission on the item's project (no
ownership check, by design), and a new generation of the same
`(project, source_branch)` then trusts every earlier generation's commits
(`ensure_mr`'s generation lookup selected by project and branch, *not* by caller).
So caller B cancels caller A's live item, submits its own content for A's
branch, and the service force-pushes over A's commit and adopts, retitles and
(with auto_merge) merges A's merge request: the MR reviewers were looking at.
"""

from __future__ import annotations

from typing import Any

import httpx
from api_harness import build_client
from harness import wait_until
from scoping_support import OWN, ci_job, scoped_rules, submission

BRANCH = "workqueue/sync"


def _item(client: httpx.Client, item_id: str, headers: dict[str, str]) -> dict[str, Any]:
    answer = client.get(f"/api/work-items/{item_id}", headers=headers)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _settled(client, item_id, headers) -> dict[str, Any]:
    def done() -> bool:
        body = _item(client, item_id, headers)
        return not body["actionable"] and (
            body["details"]["mr_iid"] is not None or body["phase"] != "active"
        )

    wait_until(done, timeout=30, what=f"item {item_id} settled")
    return _item(client, item_id, headers)


def test_cancel_then_resubmit_does_not_take_over_another_callers_branch_or_mr(
    database_url, simulator, issuer, key, projects
):
    del projects
    job_a = ci_job(issuer, key, ref="main")
    job_b = ci_job(issuer, key, ref="feature")
    with build_client(
        database_url, simulator, local_user=None, rules=scoped_rules(issuer.issuer)
    ) as client:
        mine = client.post(
            "/api/work-items/mr",
            json=submission(OWN, BRANCH, title="A: reviewed change", auto_merge=False),
            headers=job_a,
        )
        assert mine.status_code == 201, mine.text
        a = _settled(client, mine.json()["id"], job_a)
        a_iid, a_sha = a["details"]["mr_iid"], a["details"]["mr_sha"]
        assert a_iid is not None
        assert simulator.branch_head(OWN, BRANCH) == a_sha

        # B may not update A's live item ...
        assert (
            client.post(
                "/api/work-items/mr", json=submission(OWN, BRANCH, title="B"), headers=job_b
            ).status_code
            == 409
        )
        # ... but may cancel it and then submit a new generation of the branch.
        assert client.post(f"/api/work-items/{a['id']}/cancel", headers=job_b).status_code == 200
        evil = submission(
            OWN,
            BRANCH,
            title="B: hijacked",
            auto_merge=False,
            file_actions=[{"action": "update", "file_path": "kernel.spec", "content": "evil\n"}],
        )
        theirs = client.post("/api/work-items/mr", json=evil, headers=job_b)
        assert theirs.status_code == 201, theirs.text
        b = _settled(client, theirs.json()["id"], job_b)

        mr = simulator.merge_request(OWN, a_iid)
        # A's branch and MR are not B's to rewrite: B's item fails naming A's
        # head, as for any commit the service did not make *for B*.
        broken = []
        if simulator.branch_head(OWN, BRANCH) != a_sha:
            broken.append("A's commit was force-pushed over")
        if mr["title"] != "A: reviewed change":
            broken.append(f"A's MR !{a_iid} retitled to {mr['title']!r}")
        if b["details"]["mr_iid"] == a_iid:
            broken.append("B's item adopted A's merge request")
        assert broken == []
        assert b["phase"] == "failed"
        assert a_sha in b["error"]


def test_an_orphaned_mr_of_another_callers_item_is_not_adopted(
    database_url, simulator, issuer, key, projects
):
    """A's branch is gone but A's MR is still open: B's new item must not adopt it."""
    del projects
    job_a = ci_job(issuer, key, ref="main")
    job_b = ci_job(issuer, key, ref="feature")
    with build_client(
        database_url, simulator, local_user=None, rules=scoped_rules(issuer.issuer)
    ) as client:
        mine = client.post(
            "/api/work-items/mr",
            json=submission(OWN, BRANCH, title="A: reviewed change", auto_merge=False),
            headers=job_a,
        )
        a = _settled(client, mine.json()["id"], job_a)
        a_iid = a["details"]["mr_iid"]
        assert client.post(f"/api/work-items/{a['id']}/cancel", headers=job_b).status_code == 200
        simulator.delete_branch(OWN, BRANCH)
        theirs = client.post(
            "/api/work-items/mr", json=submission(OWN, BRANCH, title="B"), headers=job_b
        )
        assert theirs.status_code == 201, theirs.text
        b = _settled(client, theirs.json()["id"], job_b)
        assert b["phase"] == "failed"
        assert f"!{a_iid}" in b["error"]
        assert "another caller" in b["error"]
        assert simulator.merge_request(OWN, a_iid)["title"] == "A: reviewed change"
        assert simulator.branch_head(OWN, BRANCH) is None  # nothing was pushed
