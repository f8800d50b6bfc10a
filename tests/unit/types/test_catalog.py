"""The catalog: one list of plugins, and everything about types derived from it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from workqueue import schema
from workqueue.types.agent.models import AgentWorkItem
from workqueue.types.catalog import (
    PLUGIN_MODULES,
    Catalog,
    DuplicatePluginError,
    catalog,
    known_types,
    load_catalog,
    type_config_models,
)
from workqueue.types.mr.models import MRWorkItem
from workqueue.types.plugin import ItemTypePlugin
from workqueue.types.trunk.models import TrunkQueue, TrunkWorkItem


class _Section(BaseModel):
    pass


def _install(registry, section, context):
    registry.register("x", model=MRWorkItem, decider=lambda _item, _dims: None)


def _plugin(name: str) -> ItemTypePlugin:
    return ItemTypePlugin(name=name, config_model=_Section, install=_install, models=())


def test_a_second_plugin_of_a_name_is_refused():
    plugins = Catalog([_plugin("x")])
    with pytest.raises(DuplicatePluginError, match="'x'"):
        plugins.add(_plugin("x"))
    assert [plugin.name for plugin in plugins] == ["x"]


def test_this_builds_catalog_derives_installers_sections_tables_and_routes():
    assert set(known_types()) == {"mr", "trunk", "agent"}
    assert set(type_config_models()) == {"mr", "trunk", "agent"}
    assert set(catalog().detail_models()) == {MRWorkItem, TrunkWorkItem, TrunkQueue, AgentWorkItem}
    assert catalog().detail_models() == schema.DETAIL_MODELS
    prefixes = {route.path for router in catalog().routers() for route in router.routes}
    assert "/api/work-items/mr" in prefixes
    assert any(path.startswith("/api/trunk") for path in prefixes)


def test_each_module_of_the_list_is_one_plugin():
    assert len(PLUGIN_MODULES) == len(set(PLUGIN_MODULES)) == len(list(catalog()))


def test_a_module_whose_plugin_is_not_a_plugin_is_refused():
    with pytest.raises(TypeError, match="not an ItemTypePlugin"):
        load_catalog(["workqueue.types.mr.models"])  # exports no PLUGIN
