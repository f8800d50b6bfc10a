"""The complete schema: generic tables plus every type's detail tables.

Migrations and the model/migration parity test compare against this; each
type's tables come from its plugin in the catalog (`types/catalog.py`).
"""

from __future__ import annotations

import sqlalchemy as sa

from workqueue.attention import models as attention_models
from workqueue.queue.intake import models as intake_models
from workqueue.queue.models import Base
from workqueue.queue.outbox import models as outbox_models
from workqueue.queue.submission_keys import models as submission_key_models
from workqueue.signals import models as signal_models
from workqueue.types.catalog import catalog

# Importing a type's models module maps its detail table onto Base.metadata.
DETAIL_MODELS = catalog().detail_models()
# Generic tables kept outside queue/models.py, mapped by importing them.
GENERIC_MODELS = (
    outbox_models.OutboxDelivery,
    intake_models.IncomingDelivery,
    submission_key_models.SubmissionKey,
)

# External checks' signal store (a package beside types/).
SIGNAL_MODELS = (signal_models.CheckSignal, signal_models.SignalKey)

# Attention queues (a package beside types/), mapped by importing its models.
ATTENTION_MODELS = (attention_models.AttentionQueue, attention_models.AttentionMembership)


def target_metadata() -> sa.MetaData:
    return Base.metadata
