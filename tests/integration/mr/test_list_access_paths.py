"""The filters that need their own index (migrations 0011, 0014) walk it, as prepared statements.

The service's statements go through psycopg, which prepares a statement
after a few executions; PostgreSQL may then run a generic plan in which the
filter values are parameters. So each plan here is read with the values as
parameters of a prepared statement, forced to its generic plan, not with
literals the planner could match against a partial index.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import sqlalchemy as sa
from psycopg import sql as psycopg_sql

from workqueue.queue import read_repository
from workqueue.queue.models import Phase
from workqueue.queue.retention import repository as retention_repository
from workqueue.types.mr.models import MRWorkItem
from workqueue.types.mr.repository import list_mr_items, list_mr_rows

ITEMS = 4000


def _populate(session) -> None:
    """Mostly finished items; the active ones are the newest and a few of the oldest."""
    session.execute(
        sa.text(
            "INSERT INTO work_items (id, item_type, phase, caller_identity, created_at,"
            "  updated_at) "
            "SELECT gen_random_uuid(), 'mr',"
            "  CASE WHEN n > :count - 40 OR n <= 5 THEN 'active' ELSE 'completed' END,"
            "  'tests', now() - make_interval(mins => :count - n),"
            "  now() - make_interval(mins => :count - n) "
            "FROM generate_series(1, :count) AS n"
        ),
        {"count": ITEMS},
    )
    session.execute(
        sa.text(
            "INSERT INTO mr_details (id, project, source_branch, package, title,"
            "  commit_message, file_actions, content_hash) "
            "SELECT id, 'group/project', 'bot/' || id, 'pkg-' || (abs(hashtext(id::text)) % 400),"
            "  'title', 'message', '[]'::jsonb, 'hash' FROM work_items"
        )
    )
    session.execute(sa.text("ANALYZE work_items, mr_details"))


def _sql_type(value: object) -> str:
    for python_type, sql_type in (
        (str, "text"),  # a StrEnum too
        (datetime, "timestamptz"),
        (uuid.UUID, "uuid"),
        (int, "bigint"),
    ):
        if isinstance(value, python_type):
            return sql_type
    raise TypeError(f"no SQL type for {value!r}")


def _generic_plan(session, statement) -> str:
    """EXPLAIN of `statement` prepared with its values as parameters, generic plan forced."""
    compiled = statement.compile(dialect=session.get_bind().dialect)
    names = list(compiled.params)
    text = str(compiled)
    for number, name in enumerate(names, start=1):
        text = text.replace(f"%({name})s", f"${number}")
    types = ", ".join(_sql_type(compiled.params[name]) for name in names)
    session.execute(sa.text("SET LOCAL plan_cache_mode = force_generic_plan"))
    session.connection().exec_driver_sql(f"PREPARE listed ({types}) AS {text}")
    driver = session.connection().connection.driver_connection
    values = ", ".join(
        psycopg_sql.Literal(_plain(compiled.params[name])).as_string(driver) for name in names
    )
    rows = session.connection().exec_driver_sql(f"EXPLAIN EXECUTE listed({values})")
    plan = "\n".join(row[0] for row in rows)
    session.connection().exec_driver_sql("DEALLOCATE listed")
    return plan


def _plain(value: object) -> object:
    return str(value) if isinstance(value, str) else value  # a StrEnum as its text


def _statement_of(session, **filters) -> sa.Select:
    """The page statement the API's MR list (`list_mr_rows`) sends for these filters."""
    seen: list[sa.Select] = []
    original = read_repository.list_statement

    def spy(*args, **kwargs):
        statement = original(*args, **kwargs)
        seen.append(statement)
        return statement

    read_repository.list_statement = spy
    try:
        arguments = dict.fromkeys(
            ("project", "package", "source_branch", "phase", "caller_identity", "cursor")
        )
        list_mr_rows(session, limit=50, **{**arguments, **filters})
    finally:
        read_repository.list_statement = original
    return seen[0]


def test_the_last_page_of_active_items_walks_the_phase_index(sessions):
    with sessions() as session:
        _populate(session)
        session.commit()
    with sessions() as session:
        first = list_mr_items(
            session,
            project=None,
            package=None,
            source_branch=None,
            phase=Phase.ACTIVE,
            caller_identity=None,
            limit=40,
            cursor=None,
        )
        statement = _statement_of(session, phase=Phase.ACTIVE, cursor=first.next_cursor)
        plan = _generic_plan(session, statement)
        last = session.execute(statement).mappings().all()

    assert "ix_work_items_phase_created_at_id" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert "Sort" not in plan, plan
    assert len(last) == 5
    assert {row["phase"] for row in last} == {Phase.ACTIVE}


def test_source_branch_project_and_package_filters_use_their_own_index(sessions):
    with sessions() as session:
        _populate(session)
        session.commit()
    with sessions() as session:
        item = session.scalars(sa.select(MRWorkItem).limit(1)).one()
        for filters, index, sorted_page in (
            ({"source_branch": item.source_branch}, "ix_mr_details_source_branch", True),
            # Newest first along the index itself: no sort, whatever the filter matches.
            ({"package": item.package}, "ix_mr_details_package_item_created_at_id", False),
            ({"project": item.project}, "ix_mr_details_project_item_created_at_id", False),
        ):
            statement = _statement_of(session, **filters)
            plan = _generic_plan(session, statement)
            session.rollback()
            found = session.execute(statement).mappings().all()
            assert index in plan, plan
            assert "Seq Scan" not in plan, plan
            if not sorted_page:
                # Above the dimensions' lateral aggregate (which may sort its few rows).
                assert "Sort" not in plan.split("->  Aggregate")[0], plan
            assert item.id in {row["id"] for row in found} or len(found) == 51


def test_the_prune_batch_finds_its_items_through_the_finished_index(sessions):
    with sessions() as session:
        _populate(session)
        session.commit()
    with sessions() as session:
        cutoff = retention_repository.cutoff_before(session, timedelta(hours=1))
        plan = "\n".join(
            session.execute(
                sa.text("EXPLAIN " + retention_repository.DELETE_BATCH.text),
                {"cutoff": cutoff, "batch_size": 1000},
            ).scalars()
        )

    # (How the deletes find their rows depends on the table sizes; at 1.1M
    # items benchmarks/scale.py shows them.)
    assert "Index Scan using ix_work_items_finished_updated_at on work_items" in plan, plan
