from __future__ import annotations

import pytest

from workqueue.queue.errors import DuplicateRegistrationError, UnknownItemTypeError
from workqueue.queue.models import WorkItem
from workqueue.queue.registry import TypeRegistry
from workqueue.types.catalog import build_registry
from workqueue.types.plugin import HandledTypeError, InstallContext


def decide(item, dimensions):
    return None


def noop(context):
    return None


def test_registering_a_type_twice_is_an_error():
    registry = TypeRegistry()
    registry.register("t", model=WorkItem, decider=decide)
    with pytest.raises(DuplicateRegistrationError, match="item type 't'"):
        registry.register("t", model=WorkItem, decider=decide)


@pytest.mark.parametrize("method", ["add_executor", "add_event_handler", "add_resolver"])
def test_registering_a_handler_twice_is_an_error(method):
    registration = TypeRegistry().register("t", model=WorkItem, decider=decide)
    getattr(registration, method)("x", noop)
    with pytest.raises(DuplicateRegistrationError, match="'x' is already registered"):
        getattr(registration, method)("x", noop)


def test_lookups_of_unknown_names_fail_clearly():
    registry = TypeRegistry()
    registration = registry.register("t", model=WorkItem, decider=decide)
    with pytest.raises(UnknownItemTypeError, match="no item type 'u'"):
        registry.get("u")
    with pytest.raises(UnknownItemTypeError, match="has no executor 'missing'"):
        registration.executor("missing")


def test_registries_are_independent_objects():
    first, second = TypeRegistry(), TypeRegistry()
    first.register("t", model=WorkItem, decider=decide)
    assert "t" in first
    assert "t" not in second
    assert first.item_types == frozenset({"t"})


def test_resolvers_are_found_per_event_type():
    registry = TypeRegistry()
    registry.register("a", model=WorkItem, decider=decide).add_resolver("push", noop)
    registry.register("b", model=WorkItem, decider=decide)
    assert registry.resolvers_for("push") == [("a", noop)]
    assert registry.resolvers_for("note") == []


def test_build_registry_installs_the_handled_types_only():
    installed = []

    def install(registry, section, context):
        assert context == InstallContext(gitlab_token="t")
        installed.append(dict(section))
        registry.register("mine", model=WorkItem, decider=decide)

    registry = build_registry(
        {"mine": {"option": 1}},
        InstallContext(gitlab_token="t"),
        available={"mine": install, "theirs": install},
    )
    assert registry.item_types == frozenset({"mine"})
    assert installed == [{"option": 1}]
    assert build_registry({}, available={"mine": install}).item_types == frozenset()


def test_build_registry_rejects_unknown_types():
    with pytest.raises(HandledTypeError, match=r"handled_types\.nope: unknown item type"):
        build_registry({"nope": None}, available={})


def test_mr_section_errors_name_the_field():
    with pytest.raises(HandledTypeError, match=r"handled_types\.mr\.max_actions: "):
        build_registry({"mr": {"max_actions": 0}}, InstallContext(gitlab_token="t"))
    with pytest.raises(HandledTypeError, match=r"handled_types\.mr\.colour: Extra inputs"):
        build_registry({"mr": {"colour": "blue"}}, InstallContext(gitlab_token="t"))


def test_mr_needs_a_gitlab_token():
    with pytest.raises(HandledTypeError, match="WORKQUEUE_SERVICE_GITLAB_TOKEN"):
        build_registry({"mr": {}}, InstallContext())
