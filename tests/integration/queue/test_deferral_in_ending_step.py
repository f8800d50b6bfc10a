"""A step that ends its item writes no deferral, even one its events asked for.

The trigger of migration 0009 clears an item's deferrals when it leaves
`active`; a step writes its dimension rows after the item, so a deferral an
event set in the step that then ended the item (an applied webhook pushing
the MR drift check back, then the merge) would outlive the item.
"""

from __future__ import annotations

from datetime import timedelta

from sample_type import create_item

from workqueue.queue import enqueue, read_repository
from workqueue.queue.dimensions import DimensionUpdate
from workqueue.queue.models import DimensionStatus, Phase
from workqueue.queue.processing import step_repository


def test_rows_written_by_a_step_that_ended_the_item_hold_no_deferral(sessions):
    with sessions() as session:
        ended, active = (create_item(session, ["a"], notify=False) for _ in range(2))
        session.commit()
    with sessions() as session:
        later = enqueue.database_now(session) + timedelta(hours=1)
        item = read_repository.get_item(session, ended)
        assert item is not None
        item.phase = Phase.COMPLETED
        session.flush()  # as the loop does: the items' changes, then their rows
        deferral = DimensionUpdate("needs_check", DimensionStatus.TRUE, pending_until=later)
        step_repository.write_step_rows(session, [(ended, deferral), (active, deferral)], [])
        session.commit()
    with sessions() as session:
        rows = read_repository.dimensions_of(session, [ended, active])
    [ended_row] = [row for row in rows[ended] if row.dimension == "needs_check"]
    [active_row] = [row for row in rows[active] if row.dimension == "needs_check"]
    assert (ended_row.status, ended_row.pending_until) == (DimensionStatus.TRUE, None)
    assert active_row.pending_until == later
