"""Lists at scale: a page costs a constant number of queries and walks an index."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from workqueue.api.schemas import listed_item_body
from workqueue.queue import read_repository
from workqueue.queue.models import WorkItem
from workqueue.types.mr.models import MRWorkItem
from workqueue.types.mr.repository import list_mr_items


def _create_mr_items(session, count: int) -> None:
    session.execute(
        sa.text(
            "INSERT INTO work_items (id, item_type, caller_identity, project_path, created_at) "
            "SELECT gen_random_uuid(), 'mr', 'tests', 'group/project', "
            "  now() - make_interval(secs => n % 7) "  # equal created_at: the id breaks ties
            "FROM generate_series(1, :count) AS n"
        ),
        {"count": count},
    )
    session.execute(
        sa.text(
            "INSERT INTO mr_details (id, project, source_branch, title, commit_message, "
            "  file_actions, content_hash) "
            "SELECT id, 'group/project', 'bot/' || id, 'title', 'message', '[]'::jsonb, 'hash' "
            "FROM work_items"
        )
    )


@contextmanager
def _statements(engine: Engine) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def test_a_generic_page_of_50_costs_a_constant_number_of_queries(engine, sessions):
    with sessions() as session:
        _create_mr_items(session, 120)
        session.commit()
    with sessions() as session, _statements(engine) as statements:
        page = read_repository.list_items(session, item_types=None, limit=50, cursor=None)
        dimensions = read_repository.dimensions_of(session, [item.id for item in page.items])
        bodies = [listed_item_body(item, dimensions[item.id]) for item in page.items]
    assert len(bodies) == 50
    assert all(body.details["project"] == "group/project" for body in bodies)
    # the page, the mr details of all its items, their dimensions
    assert len(statements) <= 4, statements


def test_pages_are_ordered_by_created_at_then_work_item_id_across_both_lists(sessions):
    with sessions() as session:
        _create_mr_items(session, 120)
        session.commit()
        expected = (
            session.execute(sa.text("SELECT id FROM work_items ORDER BY created_at DESC, id DESC"))
            .scalars()
            .all()
        )
    for lister in (
        lambda session, cursor: read_repository.list_items(
            session, item_types=None, limit=25, cursor=cursor
        ),
        lambda session, cursor: list_mr_items(
            session,
            project=None,
            package=None,
            source_branch=None,
            phase=None,
            caller_identity=None,
            limit=25,
            cursor=cursor,
        ),
    ):
        seen: list = []
        cursor = None
        with sessions() as session:
            while True:
                page = lister(session, cursor)
                seen += [item.id for item in page.items]
                cursor = page.next_cursor
                if cursor is None:
                    break
        assert seen == list(expected)


def _plan(session, statement: sa.Select) -> str:
    compiled = statement.compile(
        dialect=session.get_bind().dialect, compile_kwargs={"literal_binds": True}
    )
    return "\n".join(session.execute(sa.text(f"EXPLAIN {compiled}")).scalars())


def test_newest_first_lists_walk_an_index_instead_of_sorting_the_table(sessions):
    with sessions() as session:
        _create_mr_items(session, 3000)
        session.execute(sa.text("ANALYZE work_items, mr_details"))
        session.commit()
    with sessions() as session:
        mr_page = read_repository.list_statement(
            MRWorkItem, item_types=None, filters=[], limit=50, cursor=None
        )
        generic = read_repository.list_statement(
            WorkItem,
            item_types=["mr"],
            filters=[WorkItem.phase == "active"],
            limit=50,
            cursor=None,
        )
        # With every item of one type, (phase, created_at, id) (0011) serves
        # the generic page as well as (item_type, phase, created_at, id).
        for statement, indexes in (
            (mr_page, ["ix_work_items_created_at_id"]),
            (
                generic,
                [
                    "ix_work_items_item_type_phase_created_at_id",
                    "ix_work_items_phase_created_at_id",
                ],
            ),
        ):
            plan = _plan(session, statement)
            assert any(f"using {index} on" in plan for index in indexes), plan
            assert "Sort" not in plan, plan
