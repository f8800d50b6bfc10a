"""The generic work-queue engine, and the one surface item types code against.

Nothing in this package knows about a particular item type, GitLab, HTTP or
authentication: types plug in through `TypeRegistry`. What a type may use is
exported here and nowhere else (tests/unit/test_layering.py holds `types/**` to
this list); the engine's own parts import each other by module.

The parts, each a subpackage or module:

* `contract`, `registry`, `models`, `dimensions`, `errors` — what a type is;
* `enqueue` — the lock protocol of making items actionable (DDR-34);
* `processing/` — the dispatcher, the worker pool, a step, the sweeps;
* `intake/` — deliveries stored by the receivers, resolved into events;
* `audit/`, `outbox/`, `retention/`, `submission_keys/` — what the engine keeps;
* `read_repository`, `holding_limits`, `ownership_repository` — reads and limits.
"""

from __future__ import annotations

from workqueue.queue import enqueue, pg_arrays, read_repository
from workqueue.queue.audit.log import AuditEntry
from workqueue.queue.contract import (
    Action,
    CancelHook,
    Creator,
    Decider,
    EventContext,
    EventHandler,
    EventResult,
    ExecutionContext,
    Executor,
    FailureHook,
    ManyResolver,
    ProjectPathResolver,
    ProjectSubmissionCheck,
    Resolver,
    RetryHook,
    dimension_audit_entry,
    dimension_changes,
)
from workqueue.queue.dimensions import Dimensions, DimensionUpdate
from workqueue.queue.enqueue import driver_connection
from workqueue.queue.errors import DuplicateRegistrationError, PermanentError
from workqueue.queue.holding_limits import (
    HoldingLimitError,
    HoldingLimits,
    Owner,
    Submitter,
    check_content_growth,
    check_new_live_item,
    identity_owner,
)
from workqueue.queue.intake.deliveries import store_for_later
from workqueue.queue.models import (
    Base,
    DimensionStatus,
    Phase,
    WorkItem,
    WorkItemStatus,
    enum_by_value,
)
from workqueue.queue.outbox.emit import emit
from workqueue.queue.read_repository import (
    MAX_PAGE_SIZE,
    OrderKeys,
    Page,
    RowPage,
    VisibilityGrant,
    list_items,
    list_rows,
)
from workqueue.queue.registry import ItemTypeRegistration, TypeRegistry

__all__ = [
    "MAX_PAGE_SIZE",
    "Action",
    "AuditEntry",
    "Base",
    "CancelHook",
    "Creator",
    "Decider",
    "DimensionStatus",
    "DimensionUpdate",
    "Dimensions",
    "DuplicateRegistrationError",
    "EventContext",
    "EventHandler",
    "EventResult",
    "ExecutionContext",
    "Executor",
    "FailureHook",
    "HoldingLimitError",
    "HoldingLimits",
    "ItemTypeRegistration",
    "ManyResolver",
    "OrderKeys",
    "Owner",
    "Page",
    "PermanentError",
    "Phase",
    "ProjectPathResolver",
    "ProjectSubmissionCheck",
    "Resolver",
    "RetryHook",
    "RowPage",
    "Submitter",
    "TypeRegistry",
    "VisibilityGrant",
    "WorkItem",
    "WorkItemStatus",
    "check_content_growth",
    "check_new_live_item",
    "dimension_audit_entry",
    "dimension_changes",
    "driver_connection",
    "emit",
    "enqueue",
    "enum_by_value",
    "identity_owner",
    "list_items",
    "list_rows",
    "pg_arrays",
    "read_repository",
    "store_for_later",
]
