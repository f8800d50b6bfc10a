"""batched step outcomes

`workqueue_finish_steps` ends the steps of a whole batch of claims in one
round trip: each item either goes idle (under its advisory lock, exactly as
`workqueue_go_idle` decides: lease still ours, `updated_at` unchanged, no
waiting event) or keeps its lease for another step. In a batch the lock is
only tried: an item whose lock is busy continues instead of going idle, so a
batch never waits on a lock while holding others (no deadlock with
enqueuers); a lone item waits for it. Every row is fenced on
its own lease token; an item missing from the answer has lost its lease.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 10:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

FINISH_STEPS = """
CREATE FUNCTION workqueue_finish_steps(
    item_ids uuid[], tokens uuid[], seen_updated_at timestamptz[],
    want_idle boolean[], succeeded boolean[], lease_seconds double precision,
    wait_for_locks boolean
) RETURNS TABLE (item_id uuid, outcome text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    lockable uuid[];
    idled uuid[];
BEGIN
    -- An item goes idle only under its advisory lock (DDR-34). A batch never
    -- waits for one: whoever holds it is an enqueuer about to add work for the
    -- item (or one waiting for a row this step holds: waiting would deadlock),
    -- so a busy lock means "continue" and the next step looks again. A lone
    -- item (`wait_for_locks`) waits, as a single step always did, rather than
    -- spin through steps while an enqueuer finishes.
    IF wait_for_locks THEN
        PERFORM pg_advisory_xact_lock(lock_key) FROM (
            SELECT DISTINCT workqueue_item_lock_key(step.id) AS lock_key
            FROM unnest(item_ids, want_idle) AS step(id, idle)
            WHERE step.idle ORDER BY 1
        ) AS keys;
        SELECT coalesce(array_agg(step.id), '{}') INTO lockable
        FROM unnest(item_ids, want_idle) AS step(id, idle) WHERE step.idle;
    ELSE
        SELECT coalesce(array_agg(step.id), '{}') INTO lockable
        FROM unnest(item_ids, want_idle) AS step(id, idle)
        WHERE step.idle AND pg_try_advisory_xact_lock(workqueue_item_lock_key(step.id));
    END IF;

    WITH step AS (
        SELECT * FROM unnest(item_ids, tokens, seen_updated_at, want_idle, succeeded)
            AS step(id, token, seen, idle, ok)
    ), went_idle AS (
        UPDATE work_items AS item SET
            actionable = false, leased_until = NULL, lease_token = NULL, updated_at = now(),
            attempts = CASE WHEN step.ok THEN 0 ELSE item.attempts END,
            error = CASE WHEN step.ok THEN NULL ELSE item.error END,
            next_attempt_at = CASE WHEN step.ok THEN NULL ELSE item.next_attempt_at END
        FROM step
        WHERE item.id = step.id AND step.id = ANY(lockable)
          AND item.lease_token = step.token AND item.updated_at = step.seen
          AND NOT EXISTS (SELECT 1 FROM pending_events AS event
                          WHERE event.work_item_id = step.id)
        RETURNING item.id
    )
    SELECT coalesce(array_agg(id), '{}') INTO idled FROM went_idle;

    RETURN QUERY SELECT idle_id, 'idle'::text FROM unnest(idled) AS idle_id;

    -- Everything else that is still ours continues: the lease runs from the
    -- commit's clock, not the step's start (a step may hold its row longer
    -- than a lease; the heartbeat skips locked rows).
    RETURN QUERY
    WITH step AS (
        SELECT * FROM unnest(item_ids, tokens, succeeded) AS step(id, token, ok)
    ), continued AS (
        UPDATE work_items AS item SET
            leased_until = clock_timestamp() + make_interval(secs => lease_seconds),
            attempts = CASE WHEN step.ok THEN 0 ELSE item.attempts END,
            error = CASE WHEN step.ok THEN NULL ELSE item.error END,
            next_attempt_at = CASE WHEN step.ok THEN NULL ELSE item.next_attempt_at END
        FROM step
        WHERE item.id = step.id AND item.lease_token = step.token
          AND NOT (step.id = ANY(idled))
        RETURNING item.id
    )
    SELECT continued.id, 'continue'::text FROM continued;
END
$$
"""


def upgrade() -> None:
    op.execute(FINISH_STEPS)


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION workqueue_finish_steps("
        "uuid[], uuid[], timestamptz[], boolean[], boolean[], double precision, boolean)"
    )
