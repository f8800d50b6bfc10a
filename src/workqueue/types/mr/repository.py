"""SQL of the `mr` type: identity lookups for the upsert (DDR-39/40), list filters,
and which active items a GitLab hook concerns (DDR-32)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypedDict, Unpack

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.queue import (
    OrderKeys,
    Page,
    Phase,
    RowPage,
    driver_connection,
    list_items,
    list_rows,
    pg_arrays,
)
from workqueue.types.mr.models import MR_ITEM_TYPE, MRWorkItem

# Namespace of the two-key advisory locks that serialise submissions for one
# (project, source_branch). Two-key locks never conflict with the engine's
# single-key per-item locks.
SUBMISSION_LOCK_NAMESPACE = 0x6D72  # "mr"


def idempotency_key(project: str, source_branch: str, generation: int) -> str:
    return f"{MR_ITEM_TYPE}:{project}:{source_branch}:{generation}"


def live_key(project_path: str, source_branch: str) -> str:
    """The identity at most one live item may hold (the database enforces it).

    Built from the project's canonical path (as GitLab spells it, resolved at
    submission), not from the reference the caller wrote: `42`, `team/app`
    and `Team/App` name one GitLab project, so they must name one live item.
    """
    return f"{MR_ITEM_TYPE}:{project_path}:{source_branch}"


def lock_identity(session: Session, key: str) -> None:
    """Serialise submissions for one live key so concurrent ones agree on a single item."""
    session.execute(
        sa.text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:identity))"),
        {"namespace": SUBMISSION_LOCK_NAMESPACE, "identity": key},
    )


def find_live_item(
    session: Session, project: str, source_branch: str, key: str
) -> MRWorkItem | None:
    """The active or failed item holding `key` (at most one: DDR-39 and the live-key
    index), or one created before live keys existed for this spelling of the branch."""
    return session.scalars(
        sa.select(MRWorkItem)
        .where(
            sa.or_(
                MRWorkItem.live_key == key,
                sa.and_(
                    MRWorkItem.project == project,
                    MRWorkItem.source_branch == source_branch,
                ),
            ),
            MRWorkItem.phase.in_([Phase.ACTIVE, Phase.FAILED]),
        )
        .order_by(MRWorkItem.created_at)
        .limit(1)
        .execution_options(populate_existing=True)
    ).one_or_none()


# Retention: the description goes (NULL), the commit message too ('': the column
# is NOT NULL); GitLab holds both on the MR and the commit. Each file action takes
# the form lists show (`api.schemas`): no `content`, `previous_path` and
# `encoding` null when absent, and the `size` and `sha256` of the decoded content
# (null for actions without content). The item then counts what it keeps: the
# SQL twin of `stored_bytes.bytes_kept`. Computed in PostgreSQL, so a batch of
# large items never passes through Python.
_DROP_CONTENTS = sa.text(
    """
    WITH emptied AS (
    UPDATE mr_details AS details SET description = NULL, commit_message = '', file_actions = (
        SELECT coalesce(jsonb_agg(
            jsonb_build_object('previous_path', NULL, 'encoding', NULL)
            || (entry.action - 'content')
            || jsonb_build_object(
                'size', octet_length(data.bytes),
                'sha256', encode(sha256(data.bytes), 'hex'))
            ORDER BY entry.position), '[]'::jsonb)
        FROM jsonb_array_elements(details.file_actions) WITH ORDINALITY
            AS entry(action, position)
        CROSS JOIN LATERAL (SELECT CASE
            WHEN jsonb_typeof(entry.action -> 'content') IS DISTINCT FROM 'string' THEN NULL
            WHEN entry.action ->> 'encoding' = 'base64'
                THEN decode(entry.action ->> 'content', 'base64')
            ELSE convert_to(entry.action ->> 'content', 'UTF8')
        END AS bytes) AS data
    )
    WHERE details.id = ANY(:ids)
    RETURNING details.id, details.title, details.package, details.change_kind,
        details.labels, details.file_actions
    )
    UPDATE work_items AS item SET content_bytes = octet_length(emptied.title)
        + coalesce(octet_length(emptied.package), 0)
        + coalesce(octet_length(emptied.change_kind), 0)
        + (SELECT coalesce(sum(octet_length(label)), 0)
           FROM jsonb_array_elements_text(emptied.labels) AS label)
        + (SELECT coalesce(sum(octet_length(action ->> 'file_path')), 0)
                + coalesce(sum(octet_length(action ->> 'previous_path')), 0)
           FROM jsonb_array_elements(emptied.file_actions) AS action)
    FROM emptied WHERE item.id = emptied.id
    """
)


def drop_contents(session: Session, item_ids: Sequence[uuid.UUID]) -> None:
    """Retention's content dropper: these items lose their file contents, description
    and commit message, and count what they keep."""
    session.execute(_DROP_CONTENTS, {"ids": list(item_ids)})


def _same_owner_branch_items(item: MRWorkItem) -> sa.Select[uuid.UUID, int | None]:
    # Only the same owner's generations: a cancelled generation of another
    # caller left commits and an MR that are that caller's, not this item's.
    return sa.select(MRWorkItem.id, MRWorkItem.mr_iid).where(
        MRWorkItem.project == item.project,
        MRWorkItem.source_branch == item.source_branch,
        MRWorkItem.caller_issuer == item.caller_issuer,
        MRWorkItem.caller_identity == item.caller_identity,
    )


def own_generation_ids(session: Session, item: MRWorkItem) -> set[uuid.UUID]:
    """This item's id and those of the same owner's earlier items for its branch."""
    if item.caller_issuer is None:
        return {item.id}  # an item from before owners were recorded vouches for itself only
    return {item.id, *(row.id for row in session.execute(_same_owner_branch_items(item)))}


def own_generation_mr_iids(session: Session, item: MRWorkItem) -> set[int]:
    """The MRs recorded by this item and the same owner's earlier items for its branch."""
    recorded = {item.mr_iid} if item.mr_iid is not None else set()
    if item.caller_issuer is None:
        return recorded
    rows = session.execute(_same_owner_branch_items(item))
    return recorded | {row.mr_iid for row in rows if row.mr_iid is not None}


def next_generation(session: Session, project: str, source_branch: str) -> int:
    """One more than the newest generation of this branch's items (1 for the first)."""
    newest = session.execute(
        sa.select(sa.func.max(MRWorkItem.generation)).where(
            MRWorkItem.project == project, MRWorkItem.source_branch == source_branch
        )
    ).scalar_one()
    return 1 if newest is None else int(newest) + 1


class MRListFilters(TypedDict, total=False):
    """What an MR list may be filtered on (each field given must match), and `visible`,
    the caller's scope as a SQL condition."""

    project: str | None
    package: str | None
    source_branch: str | None
    phase: Phase | None
    caller_identity: str | None
    visible: sa.ColumnElement[bool] | None


def list_mr_items(
    session: Session, *, limit: int, cursor: str | None, **wanted: Unpack[MRListFilters]
) -> Page:
    """MR items matching every given field, and `visible` (the caller's scope), newest first."""
    return list_items(
        session,
        model=MRWorkItem,
        item_types=None,
        filters=mr_list_filters(wanted),
        limit=limit,
        cursor=cursor,
        order_keys=_order_keys(wanted),
    )


def list_mr_rows(
    session: Session, *, limit: int, cursor: str | None, **wanted: Unpack[MRListFilters]
) -> RowPage:
    """`list_mr_items` as plain rows (the API's list)."""
    return list_rows(
        session,
        model=MRWorkItem,
        item_types=None,
        filters=mr_list_filters(wanted),
        limit=limit,
        cursor=cursor,
        order_keys=_order_keys(wanted),
    )


def _order_keys(wanted: MRListFilters) -> OrderKeys | None:
    """Project and package pages walk their `(column, item_created_at, id)` index."""
    if wanted.get("project") is None and wanted.get("package") is None:
        return None
    details = MRWorkItem.__table__.c
    return (details.item_created_at, details.id)


def mr_list_filters(wanted: MRListFilters) -> list[sa.ColumnElement[bool]]:
    columns = {
        "project": MRWorkItem.project,
        "package": MRWorkItem.package,
        "source_branch": MRWorkItem.source_branch,
        "phase": MRWorkItem.phase,
        "caller_identity": MRWorkItem.caller_identity,
    }
    filters = [
        column == wanted[name]  # type: ignore[literal-required]
        for name, column in columns.items()
        if wanted.get(name) is not None
    ]
    visible = wanted.get("visible")
    if visible is not None:
        filters.append(visible)
    return filters


# -- webhook resolution (DDR-32) ---------------------------------------------------

# mr_details.mr_iid is INTEGER and head_pipeline_id BIGINT: a number outside
# their range names nothing of ours (and would not cast).
_INT32_BITS = 32
_INT64_BITS = 64


def _within(value: int | None, bits: int) -> int | None:
    if value is None or not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        return None
    return value


@dataclass(frozen=True, slots=True)
class HookCriteria:
    """What one hook says about the items it concerns: an active MR item of one of
    `projects` (the hook's names for its project) meeting any criterion given. No
    project, or no criterion, names no item."""

    projects: tuple[str, ...]
    # The hook's project id when the hook names no path: items that recorded it.
    project_id: int | None = None
    mr_iid: int | None = None
    branch_without_mr: str | None = None
    pipeline_id: int | None = None
    sha: str | None = None
    target_branch: str | None = None
    source_branch: str | None = None

    def usable(self) -> HookCriteria | None:
        """These criteria with numbers outside the columns' ranges dropped; None when
        nothing is left to match."""
        usable = replace(
            self,
            mr_iid=_within(self.mr_iid, _INT32_BITS),
            pipeline_id=_within(self.pipeline_id, _INT64_BITS),
        )
        criteria = (
            usable.mr_iid,
            usable.branch_without_mr,
            usable.pipeline_id,
            usable.sha,
            usable.target_branch,
            usable.source_branch,
        )
        if not self.projects or all(value is None for value in criteria):
            return None
        return usable


# One statement for any number of hooks of any kind (prepared once per
# connection): hook `n`'s criteria are row `n` of the arrays, its project's
# names the `name_hooks` entries equal to `n`; a NULL criterion matches
# nothing. The project is matched on the item's canonical path
# (`work_items.project_path`, resolved through GitLab at submission) against
# the hook's id and `path_with_namespace`; a hook with an id and no path (Job
# Hooks before GitLab 16.0) names the paths of the active items that recorded
# that id (`mr_details.project_id`, through its partial index; the handlers
# then check the id itself). The active items of the batch's projects are read
# once (the partial index of active items by project path) and each criterion
# is an equality join on them, so a batch costs the projects' active items plus
# its hooks, not their product (one `OR` of the
# criteria per hook and item took 17 ms for 100 hooks on a 100-item project).
_ACTIVE_ITEMS_SQL = """
WITH hook AS (
    SELECT * FROM unnest(
        CAST(%(hooks)s AS int[]), CAST(%(mr_iids)s AS integer[]),
        CAST(%(branches_without_mr)s AS text[]), CAST(%(pipeline_ids)s AS bigint[]),
        CAST(%(shas)s AS text[]), CAST(%(target_branches)s AS text[]),
        CAST(%(source_branches)s AS text[]), CAST(%(project_ids)s AS bigint[])
    ) AS hook(n, mr_iid, branch_without_mr, pipeline_id, sha, target_branch, source_branch,
              project_id)
), name AS (
    SELECT * FROM unnest(CAST(%(name_hooks)s AS int[]), CAST(%(names)s AS text[]))
        AS name(n, project)
    UNION
    SELECT hook.n, item.project_path FROM hook
    JOIN mr_details AS detail ON detail.project_id = hook.project_id
    JOIN work_items AS item ON item.id = detail.id AND item.phase = 'active'
), asked AS (
    SELECT hook.*, name.project FROM hook JOIN name USING (n)
), active AS MATERIALIZED (
    SELECT item.project_path AS project, detail.id, detail.mr_iid, detail.source_branch,
           detail.head_pipeline_id, detail.mr_sha, detail.target_branch
    FROM work_items AS item JOIN mr_details AS detail ON detail.id = item.id
    WHERE item.phase = 'active' AND item.project_path IN (SELECT project FROM name)
), found AS (
    SELECT asked.n, active.id FROM asked JOIN active
        ON active.project = asked.project AND active.mr_iid = asked.mr_iid
    UNION ALL
    SELECT asked.n, active.id FROM asked JOIN active
        ON active.project = asked.project AND active.mr_iid IS NULL
        AND active.source_branch = asked.branch_without_mr
    UNION ALL
    SELECT asked.n, active.id FROM asked JOIN active
        ON active.project = asked.project AND active.head_pipeline_id = asked.pipeline_id
    UNION ALL
    SELECT asked.n, active.id FROM asked JOIN active
        ON active.project = asked.project AND active.mr_sha = asked.sha
    UNION ALL
    SELECT asked.n, active.id FROM asked JOIN active
        ON active.project = asked.project AND active.target_branch = asked.target_branch
    UNION ALL
    SELECT asked.n, active.id FROM asked JOIN active
        ON active.project = asked.project AND active.source_branch = asked.source_branch
)
SELECT DISTINCT n, id FROM found ORDER BY n, id
"""


def active_items_on_commit(session: Session, project: str, sha: str) -> list[uuid.UUID]:
    """Active MR items of `project` whose MR head or merge commit is `sha` (signals)."""
    query = (
        sa.select(MRWorkItem.id)
        .where(
            MRWorkItem.phase == Phase.ACTIVE,
            MRWorkItem.project_path == project,
            sa.or_(MRWorkItem.mr_sha == sha, MRWorkItem.merge_commit_sha == sha),
        )
        .order_by(MRWorkItem.id)
    )
    return list(session.scalars(query))


def active_items_for_hooks(
    session: Session, hooks: Sequence[HookCriteria | None]
) -> list[list[uuid.UUID]]:
    """For each hook, in order, its active MR items (by id); None names no item.

    One statement for all of them: the intake resolves a batch of deliveries at once.
    """
    found: list[list[uuid.UUID]] = [[] for _ in hooks]
    usable = [(n, criteria.usable()) for n, criteria in enumerate(hooks) if criteria is not None]
    asked = [(n, criteria) for n, criteria in usable if criteria is not None]
    if not asked:
        return found

    params = {
        "hooks": pg_arrays.integers(n for n, _ in asked),
        "mr_iids": pg_arrays.integers(criteria.mr_iid for _, criteria in asked),
        "branches_without_mr": pg_arrays.texts(c.branch_without_mr for _, c in asked),
        "pipeline_ids": pg_arrays.integers(criteria.pipeline_id for _, criteria in asked),
        "shas": pg_arrays.texts(criteria.sha for _, criteria in asked),
        "target_branches": pg_arrays.texts(criteria.target_branch for _, criteria in asked),
        "source_branches": pg_arrays.texts(criteria.source_branch for _, criteria in asked),
        "project_ids": pg_arrays.integers(criteria.project_id for _, criteria in asked),
        "name_hooks": pg_arrays.integers(n for n, criteria in asked for _ in criteria.projects),
        "names": pg_arrays.texts(name for _, criteria in asked for name in criteria.projects),
    }
    # Straight to the driver: it runs for every batch of deliveries the intake
    # resolves, and SQLAlchemy's per-statement overhead was most of its cost.
    for n, item_id in driver_connection(session).execute(_ACTIVE_ITEMS_SQL, params):
        found[n].append(item_id)
    return found


def live_item_of_mr(session: Session, project: str, mr_iid: int) -> MRWorkItem | None:
    """The live item whose MR is `!mr_iid` of `project` (as the item spells its project),
    if the service opened that MR; the newest when generations share it."""
    return session.scalars(
        sa.select(MRWorkItem)
        .where(
            MRWorkItem.project == project,
            MRWorkItem.mr_iid == mr_iid,
            MRWorkItem.phase.in_([Phase.ACTIVE, Phase.FAILED]),
        )
        .order_by(MRWorkItem.created_at.desc())
        .limit(1)
    ).first()
