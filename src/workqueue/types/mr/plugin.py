"""The `mr` item type as the service assembles it: commit, MR, merge when green."""

from __future__ import annotations

from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.install import install_mr
from workqueue.types.mr.models import MR_ITEM_TYPE, MRWorkItem
from workqueue.types.mr.routes import router
from workqueue.types.plugin import ItemTypePlugin

PLUGIN = ItemTypePlugin(
    name=MR_ITEM_TYPE,
    config_model=MRTypeConfig,
    install=install_mr,
    models=(MRWorkItem,),
    router=router,
)
