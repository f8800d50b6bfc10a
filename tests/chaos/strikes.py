"""Killing a replica at a chosen moment of an item's life.

A strike widens one window with a simulator delay, waits until some replica's call
is inside it (the request log names the caller), and SIGKILLs exactly that replica:

* `commit_to_mr` — the commit is pushed, the MR creation call has not been handled;
* `mid_merge` — GitLab has merged, the answer has not reached the replica;
* `mid_webhook` — the replica is acting on a Pipeline Hook (reconcile reads the MR);
* `random` — any replica at any moment.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from invariants import item_branch
from replicas import Replica
from workload import PROJECT

from workqueue.testing.gitlab_simulator import GitLabSimulator

MR_ROUTE = "/projects/:id/merge_requests/:merge_request_iid"
WINDOWS: dict[str, tuple[str, str, dict[str, float | None]]] = {
    "commit_to_mr": (
        "POST",
        "/projects/:id/merge_requests",
        {"status": None, "latency": 0.5},
    ),
    "mid_merge": ("PUT", f"{MR_ROUTE}/merge", {"status": None, "latency_after": 0.5}),
    "mid_webhook": ("GET", MR_ROUTE, {"status": None, "latency": 0.5}),
}
KINDS = [*WINDOWS, "random"]
ARM_TIMEOUT_SECONDS = 8


@dataclass
class Strike:
    kind: str
    replica: str
    at: float  # time.time() of the kill
    branch: str | None  # the item whose call was cut short (None for random strikes)


def strike(
    simulator: GitLabSimulator, group: list[Replica], kind: str, rng: random.Random
) -> Strike:
    """Kill one replica (chosen by the window, else at random); returns what was hit."""
    if kind in WINDOWS:
        method, route, options = WINDOWS[kind]
        armed_at = time.time()
        rule = simulator.inject_fault(method, route, times=1, **options)
        deadline = time.monotonic() + ARM_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            for call in simulator.log.in_flight():
                if (
                    call.route == route
                    and call.method == method
                    and (call.started_at or 0) >= armed_at
                ):
                    victim = next((r for r in group if r.name == call.caller), None)
                    if victim is not None and victim.ready:
                        victim.kill9()
                        branches = {
                            mr["iid"]: mr["source_branch"]
                            for mr in simulator.merge_requests(PROJECT)
                        }
                        return Strike(kind, victim.name, time.time(), item_branch(call, branches))
            time.sleep(0.005)
        # Nothing reached that window in time (the run is ending): strike at random.
        rule.times = 0
        kind = f"{kind}_missed"
    else:
        time.sleep(rng.uniform(0, 1.5))
    victim = rng.choice([r for r in group if r.ready])
    victim.kill9()
    return Strike(kind, victim.name, time.time(), None)


def recovery_seconds(simulator: GitLabSimulator, hit: Strike) -> float | None:
    """From the kill to the next GitLab call about the item it interrupted (any replica)."""
    if hit.branch is None:
        return None
    branches = {mr["iid"]: mr["source_branch"] for mr in simulator.merge_requests(PROJECT)}
    later = [
        call.started_at
        for call in simulator.log.records()
        if call.started_at is not None
        and call.started_at > hit.at
        and item_branch(call, branches) == hit.branch
    ]
    return min(later) - hit.at if later else None
