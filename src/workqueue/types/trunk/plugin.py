"""The `trunk` item type as the service assembles it: post-merge validation per branch."""

from __future__ import annotations

from workqueue.types.plugin import ItemTypePlugin
from workqueue.types.trunk.config import TrunkTypeConfig
from workqueue.types.trunk.dashboard import QUEUES_PAGE
from workqueue.types.trunk.install import install_trunk
from workqueue.types.trunk.models import TRUNK_ITEM_TYPE, TrunkQueue, TrunkWorkItem
from workqueue.types.trunk.routes import router

PLUGIN = ItemTypePlugin(
    name=TRUNK_ITEM_TYPE,
    config_model=TrunkTypeConfig,
    install=install_trunk,
    models=(TrunkWorkItem, TrunkQueue),
    router=router,
    dashboard_pages=(QUEUES_PAGE,),
)
