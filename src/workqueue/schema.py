"""The complete schema: generic tables plus every type's detail tables.

Migrations and the model/migration parity test compare against this; adding a
type means importing its models module here.
"""

from __future__ import annotations

import sqlalchemy as sa

from workqueue.queue import outbox_models
from workqueue.queue.models import Base
from workqueue.types.mr import models as mr_models

# Importing a type's models module maps its detail table onto Base.metadata.
DETAIL_MODELS = (mr_models.MRWorkItem,)
# Generic tables kept outside queue/models.py, mapped by importing them.
GENERIC_MODELS = (outbox_models.OutboxDelivery,)


def target_metadata() -> sa.MetaData:
    return Base.metadata
