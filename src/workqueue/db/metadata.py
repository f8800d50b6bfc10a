"""The complete schema: generic tables plus every type's detail tables.

Migrations and the model/migration parity test compare against this; adding a
type means importing its models module here.
"""

from __future__ import annotations

import sqlalchemy as sa


def target_metadata() -> sa.MetaData:
    from workqueue.queue.models import Base  # noqa: PLC0415 - keep db/ free of import cycles

    return Base.metadata
