"""Lists are served from plain rows (`read_repository.list_rows`, `listed_item_json`):
every page must read exactly as the model path (`list_items` + `listed_item_body`) would
write it, for each list, type and field, cursors included."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from api_harness import build_client
from mr_harness import PROJECT
from sqlalchemy.orm import Session

from workqueue.api.schemas import WorkItemPage, listed_item_body
from workqueue.db.engine import build_engine
from workqueue.queue import read_repository
from workqueue.queue.models import WorkItemStatus
from workqueue.types.mr.models import MRWorkItem
from workqueue.types.mr.repository import list_mr_items
from workqueue.types.trunk.models import TrunkQueue, TrunkWorkItem


@pytest.fixture
def quiet_client(database_url, simulator):
    with build_client(database_url, simulator, process_items=False) as client:
        yield client


@pytest.fixture
def engine(database_url):
    engine = build_engine(database_url, pool_size=1)
    yield engine
    engine.dispose()


def submission(n: int) -> dict:
    actions: list[dict] = [
        {"action": "update", "file_path": "kernel.spec", "content": f"v{n}\n"},
        {
            "action": "create",
            "file_path": f"blob-{n}.bin",
            "content": base64.b64encode(bytes([n]) * 10).decode(),
            "encoding": "base64",
        },
        {"action": "delete", "file_path": "README.md"},
        {"action": "chmod", "file_path": "run.sh", "execute_filemode": True},
    ]
    return {
        "project": PROJECT,
        "source_branch": f"workqueue/rows-{n}",
        "title": f"Rows {n}",
        "commit_message": "m",
        "file_actions": actions[: 1 + n % 4],
        **({"package": f"pkg-{n % 2}"} if n % 3 else {}),
    }


def vary_the_rows(engine) -> None:
    """Give the stored items every kind of value the body has: errors, leases, pending
    times, a second type, so each field's serialisation is compared, not just nulls."""
    now = datetime.now(UTC)
    with Session(engine) as session, session.begin():
        items = session.scalars(sa.select(MRWorkItem).order_by(MRWorkItem.created_at)).all()
        items[0].error = 'GitLab said "no" <b>twice</b>\n'
        items[0].attempts = 3
        items[1].leased_until = now + timedelta(seconds=30)
        items[1].next_attempt_at = now + timedelta(minutes=1)
        items[2].last_event_at = now - timedelta(hours=1)
        items[2].mr_iid = 17
        items[2].head_pipeline_status = "success"
        session.add(
            WorkItemStatus(
                work_item_id=items[3].id,
                dimension="needs_empty_check",
                variant="",
                status="true",
                pending_until=now + timedelta(hours=2),
            )
        )
        session.add(TrunkQueue(name=f"{PROJECT}:main", project=PROJECT, branch="main"))
        session.flush()
        session.add(
            TrunkWorkItem(
                caller_identity="ci",
                caller_issuer="https://issuer.example",
                project_path=PROJECT,
                queue=f"{PROJECT}:main",
                sequence=1,
                sha="a" * 40,
            )
        )


def model_page(engine, query) -> dict:
    with Session(engine) as session:
        page = query(session)
        dimensions = read_repository.dimensions_of(session, [item.id for item in page.items])
        return WorkItemPage(
            items=[listed_item_body(item, dimensions[item.id]) for item in page.items],
            next_cursor=page.next_cursor,
        ).model_dump(mode="json")


def test_every_list_page_reads_as_the_model_path_writes_it(quiet_client, engine):
    for n in range(9):
        answer = quiet_client.post("/api/work-items/mr", json=submission(n))
        assert answer.status_code == 201, answer.text
    vary_the_rows(engine)

    def generic(session, cursor, filters=()):
        return read_repository.list_items(
            session, item_types=None, filters=filters, limit=2, cursor=cursor
        )

    def mr(session, cursor, **wanted):
        arguments = {
            "project": None,
            "package": None,
            "source_branch": None,
            "phase": None,
            "caller_identity": None,
        }
        return list_mr_items(session, **{**arguments, **wanted}, limit=2, cursor=cursor)

    walks = [
        ("/api/work-items", {}, generic),
        ("/api/work-items/mr", {}, mr),
        (
            "/api/work-items/mr",
            {"package": "pkg-1"},
            lambda session, cursor: mr(session, cursor, package="pkg-1"),
        ),
        (
            "/api/work-items/mr",
            {"project": PROJECT},
            lambda session, cursor: mr(session, cursor, project=PROJECT),
        ),
    ]
    for path, filters, query in walks:
        cursor = None
        pages = 0
        while True:
            params = {**filters, "limit": 2, **({"cursor": cursor} if cursor else {})}
            answer = quiet_client.get(path, params=params)
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"] == "application/json"
            expected = model_page(
                engine, lambda session, query=query, cursor=cursor: query(session, cursor)
            )
            assert answer.json() == expected, (path, filters, pages)
            # Same keys in the same order as the model writes them.
            assert [list(item) for item in answer.json()["items"]] == [
                list(item) for item in expected["items"]
            ]
            pages += 1
            cursor = answer.json()["next_cursor"]
            if cursor is None:
                break
        assert pages >= 2, (path, filters)  # the walk crossed at least one cursor

    listed = quiet_client.get("/api/work-items", params={"limit": 50}).json()["items"]
    assert {item["item_type"] for item in listed} == {"mr", "trunk"}
    (trunk,) = [item for item in listed if item["item_type"] == "trunk"]
    assert (trunk["details"]["sha"], trunk["details"]["state"]) == ("a" * 40, "accepted")
    assert any(item["error"] for item in listed)
    assert any(dimension["pending_until"] for item in listed for dimension in item["dimensions"])


def test_a_bad_cursor_is_still_a_422_naming_it(quiet_client):
    for path in ("/api/work-items", "/api/work-items/mr"):
        answer = quiet_client.get(path, params={"cursor": "bm90IGEgY3Vyc29y"})
        assert answer.status_code == 422
        assert answer.json()["detail"][0]["loc"] == ["query", "cursor"]


def test_project_and_package_lists_page_on_an_exact_copy_of_the_creation_key(quiet_client, engine):
    """Those lists order on `mr_details.item_created_at` (migration 0014's trigger copy):
    it must equal `work_items.created_at` for every row, and a cursor taken from one
    list must continue any other exactly where the item sits."""
    for n in range(6):
        assert quiet_client.post("/api/work-items/mr", json=submission(n)).status_code == 201
    with engine.connect() as connection:
        mismatched = connection.execute(
            sa.text(
                "SELECT count(*) FROM mr_details JOIN work_items USING (id)"
                " WHERE mr_details.item_created_at IS DISTINCT FROM work_items.created_at"
            )
        ).scalar_one()
        copies = connection.execute(sa.text("SELECT count(*) FROM mr_details")).scalar_one()
    assert (mismatched, copies) == (0, 6)

    everything = quiet_client.get("/api/work-items/mr", params={"limit": 50}).json()["items"]
    newest_first = [item["id"] for item in everything]
    first = quiet_client.get("/api/work-items/mr", params={"limit": 2}).json()
    rest = quiet_client.get(
        "/api/work-items/mr", params={"project": PROJECT, "cursor": first["next_cursor"]}
    ).json()["items"]
    assert [item["id"] for item in rest] == newest_first[2:]
