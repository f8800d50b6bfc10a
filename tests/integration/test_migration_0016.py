"""Migration 0016 fills `content_bytes` of existing MR items as submissions count them."""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import command
from databases import create_database_from, drop_database

from workqueue.db.engine import build_engine
from workqueue.db.migrate import alembic_config, upgrade_to_head
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.stored_bytes import stored_bytes

SUBMISSION = MRWorkItemCreate.model_validate(
    {
        "project": "g/p",
        "source_branch": "workqueue/b",
        "target_branch": "main",
        "title": "Mise à jour 😀",
        "description": "Beschreibung: süß",
        "commit_message": "Übernahme €",
        "labels": ["bot", "süß"],
        "package": "kernel-é",
        "change_kind": "sync",
        "file_actions": [
            {"action": "update", "file_path": "docs/é.txt", "content": "€\n"},
            {"action": "create", "file_path": "b.bin", "content": "aGkK", "encoding": "base64"},
            {"action": "move", "file_path": "new/ü", "previous_path": "old/ü"},
            {"action": "delete", "file_path": "gone.md"},
        ],
    }
)


def test_0016_counts_every_stored_text_of_existing_items(server_url):
    url = create_database_from(server_url, "template0")
    engine = build_engine(url, pool_size=1)
    try:
        command.upgrade(alembic_config(engine), "0015")
        with engine.begin() as connection:
            item_id = connection.execute(
                sa.text(
                    "INSERT INTO work_items (item_type, phase, caller_identity, caller_issuer) "
                    "VALUES ('mr', 'cancelled', 'bot', 'local') RETURNING id"
                )
            ).scalar_one()
            connection.execute(
                sa.text(
                    "INSERT INTO mr_details (id, project, source_branch, target_branch, title, "
                    "description, commit_message, labels, package, change_kind, file_actions, "
                    "content_hash) VALUES (:id, :project, :source_branch, :target_branch, "
                    ":title, :description, :commit_message, CAST(:labels AS jsonb), :package, "
                    ":change_kind, CAST(:file_actions AS jsonb), 'h')"
                ),
                {
                    "id": item_id,
                    **SUBMISSION.model_dump(
                        include={
                            "project",
                            "source_branch",
                            "target_branch",
                            "title",
                            "description",
                            "commit_message",
                            "package",
                            "change_kind",
                        }
                    ),
                    "labels": json.dumps(SUBMISSION.labels),
                    "file_actions": json.dumps(
                        [action.model_dump(mode="json") for action in SUBMISSION.file_actions]
                    ),
                },
            )
        upgrade_to_head(engine)
        with engine.connect() as connection:
            counted = connection.execute(
                sa.text("SELECT content_bytes, contents_dropped_at FROM work_items WHERE id = :id"),
                {"id": item_id},
            ).one()
        assert tuple(counted) == (stored_bytes(SUBMISSION), None)
    finally:
        engine.dispose()
        drop_database(server_url, url)
