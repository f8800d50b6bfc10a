"""The trunk type's dashboard page: each validation queue's slots and last green head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workqueue.api.caller_state import Caller
from workqueue.api.deps import Runtime
from workqueue.types.plugin import DashboardPage
from workqueue.types.trunk.routes import list_queues


def queues_context(runtime: Runtime, caller: Caller) -> Mapping[str, Any]:
    return {"queues": list_queues(runtime, caller, project=None, branch=None).items}


QUEUES_PAGE = DashboardPage(
    path="trunk",
    title="Trunk queues",
    package=__package__,
    template="queues.html",
    context=queues_context,
)
