"""Attack (fixed, MEDIUM): stored text the limits did not count and retention never dropped.

`max_stored_bytes_per_caller` counted file contents only, and the safety sweep
dropped file contents only. A submission's `description` may be 1,048,576
characters (up to 4 MiB of UTF-8) and its `commit_message` 64 KiB; a file
action without content (`delete`) made the count 0, so no byte check ran at
all. Submit and cancel, repeat: at the default 120 submissions a minute one
caller stored ~480 MiB a minute of descriptions, counted by nothing and kept
until `prune` was run by hand. Reproduced with a 1,000-byte limit and three
200 KB descriptions: all three were stored.

Now an item counts the UTF-8 bytes of every text its caller makes the service
store (title, description, commit message, labels, package, change kind, file
paths and contents), checked on every submission and update; retention drops a
finished item's file contents, description and commit message, and the item
counts what is left.
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from harness import wait_until
from scoping_support import ADMIN_SUB, OWN, token
from test_attack_limits_by_ref import MR_ROUTE, admin_rule, age_items, run_safety_sweep, service

from workqueue.api.schemas import WorkItemBody

DESCRIPTION = "x" * 200_000


def delete_only(branch: str, description: str, **extra: object) -> dict[str, object]:
    return {
        "project": OWN,
        "source_branch": branch,
        "title": "Sync",
        "description": description,
        "commit_message": "Sync",
        "file_actions": [{"action": "delete", "file_path": "README.md"}],
        **extra,
    }


def kept_description_bytes(engine: sa.Engine) -> int:
    with engine.connect() as connection:
        return int(
            connection.execute(
                sa.text("SELECT coalesce(sum(octet_length(description)), 0) FROM mr_details")
            ).scalar_one()
        )


def test_descriptions_count_against_max_stored_bytes_per_caller(
    database_url, engine, simulator, issuer, key, projects
):
    del projects
    admin = token(issuer, key, ADMIN_SUB)
    limits = {"max_stored_bytes_per_caller": 1000}
    statuses = []
    with service(database_url, simulator, [admin_rule(issuer.issuer)], limits) as (client, _):
        for n in range(3):
            answer = client.post(
                MR_ROUTE, json=delete_only(f"workqueue/text-{n}", DESCRIPTION), headers=admin
            )
            statuses.append(answer.status_code)
            if answer.status_code == 201:
                cancel = client.post(f"/api/work-items/{answer.json()['id']}/cancel", headers=admin)
                assert cancel.status_code == 200
    # Each 200 KB description is over the 1,000-byte limit on its own.
    assert statuses == [429, 429, 429]
    assert kept_description_bytes(engine) == 0


def test_an_update_that_grows_only_the_description_is_refused(
    database_url, engine, simulator, issuer, key, projects
):
    del projects
    admin = token(issuer, key, ADMIN_SUB)
    limits = {"max_stored_bytes_per_caller": 1000}
    with service(database_url, simulator, [admin_rule(issuer.issuer)], limits) as (client, _):
        first = client.post(MR_ROUTE, json=delete_only("workqueue/grow", "short"), headers=admin)
        assert first.status_code == 201
        grown = client.post(MR_ROUTE, json=delete_only("workqueue/grow", "y" * 2000), headers=admin)
        kept = client.get(f"/api/work-items/{first.json()['id']}", headers=admin).json()
    assert grown.status_code == 429
    assert grown.headers["retry-after"] == "60"
    assert grown.json()["detail"].startswith(
        f"max_stored_bytes_per_caller (1000) reached for {ADMIN_SUB}"
    )
    assert kept["details"]["description"] == "short"
    assert kept_description_bytes(engine) == len("short")


def test_retention_drops_finished_items_descriptions_and_commit_messages(
    database_url, engine, simulator, issuer, key, projects
):
    """After `retention.content_days` a finished item keeps its title, labels and file
    metadata; what it still counts leaves room under the limit for new work."""
    del projects
    admin = token(issuer, key, ADMIN_SUB)
    limits = {"max_stored_bytes_per_caller": 1000}
    rules = [admin_rule(issuer.issuer)]
    with service(database_url, simulator, rules, limits, process_items=True) as (client, app):
        body = {
            **delete_only("workqueue/old", "d" * 600, labels=["bot"]),
            "commit_message": "m" * 300,
            "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "v3\n"}],
        }
        created = client.post(MR_ROUTE, json=body, headers=admin)
        assert created.status_code == 201, created.text
        item_id = created.json()["id"]
        assert client.post(f"/api/work-items/{item_id}/cancel", headers=admin).status_code == 200
        # 4 + 600 + 300 + 3 + 11 + 3 = 921 bytes held: no room for another 600.
        refused = client.post(MR_ROUTE, json=delete_only("workqueue/new", "n" * 600), headers=admin)
        assert refused.status_code == 429

        age_items(engine, [item_id], days=8)
        run_safety_sweep(app)
        wait_until(
            lambda: (
                client.get(f"/api/work-items/{item_id}", headers=admin).json()[
                    "contents_dropped_at"
                ]
                is not None
            ),
            what="the contents drop",
        )
        answer = client.get(f"/api/work-items/{item_id}", headers=admin)
        page = client.get(f"/ui/items/{item_id}", headers=admin)
        room = client.post(MR_ROUTE, json=delete_only("workqueue/new", "n" * 600), headers=admin)

    dropped = WorkItemBody.model_validate(answer.json())
    details = dropped.details
    assert (details["description"], details["commit_message"]) == (None, "")
    assert (details["title"], details["labels"]) == ("Sync", ["bot"])
    assert details["file_actions"] == [
        {
            "action": "update",
            "file_path": "kernel.spec",
            "previous_path": None,
            "encoding": "text",
            "size": 3,
            "sha256": hashlib.sha256(b"v3\n").hexdigest(),
        }
    ]
    assert page.status_code == 200
    assert "Sync" in page.text
    assert "kernel.spec" in page.text
    with engine.connect() as connection:
        held = connection.execute(
            sa.text("SELECT content_bytes FROM work_items WHERE id = CAST(:id AS uuid)"),
            {"id": item_id},
        ).scalar_one()
    assert held == len("Sync") + len("bot") + len("kernel.spec")
    assert room.status_code == 201
