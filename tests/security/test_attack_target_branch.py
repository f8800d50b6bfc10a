"""Attack (fixed): `target_branch` used to be unrestricted, so a caller can merge into branches it
must not write: another caller's bot branch (or a person's feature branch).

The source branch is confined to `source_branch_prefix` and may not be the
default branch, but the *target* may be anything. Caller B submits
`workqueue/b → workqueue/a` with auto_merge; once B's pipeline is green the
service merges B's commit into caller A's bot branch. A's open MR now carries
B's change (a reviewer merging A's MR merges B's code), and A's item can no
longer push (its head is foreign): a write into a branch B has no claim to.
"""

from __future__ import annotations

from typing import Any

import httpx
from api_harness import build_client
from harness import wait_until
from scoping_support import OWN, ci_job, scoped_rules, submission

SECRET = "attack-webhook-secret"


def _item(client: httpx.Client, item_id: str, headers) -> dict[str, Any]:
    body: dict[str, Any] = client.get(f"/api/work-items/{item_id}", headers=headers).json()
    return body


def _with_mr(client, item_id, headers) -> dict[str, Any]:
    wait_until(
        lambda: (
            (b := _item(client, item_id, headers))["details"]["mr_iid"] is not None
            and not b["actionable"]
        ),
        timeout=30,
        what="MR opened",
    )
    return _item(client, item_id, headers)


def test_a_caller_cannot_target_another_callers_bot_branch(
    database_url, simulator, issuer, key, projects
):
    """B asks for `workqueue/b -> workqueue/a` (A's bot branch): refused, nothing written."""
    del projects
    job_a, job_b = ci_job(issuer, key, ref="main"), ci_job(issuer, key, ref="feature")
    with build_client(
        database_url,
        simulator,
        local_user=None,
        webhook_secret=SECRET,
        rules=scoped_rules(issuer.issuer),
    ) as client:
        a = client.post(
            "/api/work-items/mr",
            json=submission(OWN, "workqueue/a", title="A", auto_merge=False),
            headers=job_a,
        )
        assert a.status_code == 201, a.text
        a_sha = _with_mr(client, a.json()["id"], job_a)["details"]["mr_sha"]
        writes_before = sum(simulator.request_count(m) for m in ("POST", "PUT", "DELETE"))

        b = client.post(
            "/api/work-items/mr",
            json=submission(
                OWN,
                "workqueue/b",
                title="B",
                target_branch="workqueue/a",
                file_actions=[{"action": "create", "file_path": "backdoor.sh", "content": "x\n"}],
            ),
            headers=job_b,
        )
        assert b.status_code == 422, b.text
        assert b.json()["detail"][0]["loc"] == ["body", "target_branch"]
        assert b.json()["detail"][0]["type"] == "target_not_allowed"
        assert sum(simulator.request_count(m) for m in ("POST", "PUT", "DELETE")) == writes_before
        assert simulator.branch_head(OWN, "workqueue/a") == a_sha
        assert "backdoor.sh" not in simulator.files(OWN, "workqueue/a")
