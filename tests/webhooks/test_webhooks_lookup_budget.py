"""The bound on GitLab project look-ups that webhook deliveries cause: a budget per payer
(a secret, or the SQS consumer) as a table over an injected clock, then the directory's
bounded wait with look-ups held against the GitLab simulator."""

from __future__ import annotations

import asyncio
import threading

import pytest
from mr_harness import TOKEN

from workqueue.gitlab.client import GitLabClient
from workqueue.receivers.lookup_budget import (
    LOOKUPS_PER_MINUTE,
    MAX_WAITING,
    MAX_WAITING_PER_PAYER,
    LookupBudget,
    LookupRefused,
)
from workqueue.receivers.projects import ProjectDirectory


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_figures_are_the_documented_ones():
    assert (LOOKUPS_PER_MINUTE, MAX_WAITING, MAX_WAITING_PER_PAYER) == (60, 16, 8)


@pytest.mark.parametrize(
    ("spent", "seconds_later", "left", "retry_after"),
    [
        (0, 0.0, 60, None),
        (59, 0.0, 1, None),
        (60, 0.0, 0, 1),  # one look-up comes back each second
        (60, 0.5, 0, 1),
        (60, 1.0, 1, None),
        (60, 30.0, 30, None),
        (60, 3600.0, 60, None),  # never more than a minute's worth
    ],
)
def test_a_payer_may_cause_60_look_ups_a_minute_refilled_evenly(
    spent, seconds_later, left, retry_after
):
    clock = Clock()
    budget = LookupBudget(clock)
    for _ in range(spent):
        budget.spend("webhooks.secrets[0]")
    clock.now += seconds_later

    assert budget.remaining("webhooks.secrets[0]") == left
    assert budget.remaining("webhooks.secrets[1]") == 60  # each payer its own
    if retry_after is None:
        budget.spend("webhooks.secrets[0]")
    else:
        with pytest.raises(LookupRefused) as refused:
            budget.spend("webhooks.secrets[0]")
        assert refused.value.retry_after_seconds == retry_after
        with pytest.raises(LookupRefused):
            budget.admit("webhooks.secrets[0]")  # not even queued


def test_the_wait_holds_eight_per_payer_and_sixteen_in_all():
    budget = LookupBudget(Clock())
    for _ in range(8):
        budget.admit("a")
    with pytest.raises(LookupRefused) as refused:
        budget.admit("a")
    assert refused.value.retry_after_seconds == 5
    for payer in "bbbbcccc":
        budget.admit(payer)
    with pytest.raises(LookupRefused):
        budget.admit("e")  # 16 wait: full for everyone
    budget.leave("b")
    budget.admit("e")
    budget.leave("a")
    budget.admit("a")


def test_held_look_ups_fill_the_wait_and_the_next_is_refused_at_once(simulator, world):
    """Look-ups held inside GitLab calls (the simulator answering behind a gate): the
    ninth of one secret and the seventeenth in all are refused without being queued, and
    answers already held are still given."""
    gate = threading.Event()
    client = GitLabClient(simulator.url, TOKEN, timeout=5)

    def held_project(reference: str):
        gate.wait(30)
        return client.project(reference)

    directory = ProjectDirectory([held_project], clock=Clock())
    made_up = 800_000
    simulator.reset_requests()

    async def scenario() -> tuple[list[str | None], str | None]:
        # The real project's answer first, so it is held when the wait is full.
        gate.set()
        known = await directory.path_of_soon(world.project_id, payer="a")
        gate.clear()
        waiting = [
            asyncio.ensure_future(directory.path_of_soon(made_up + n, payer=payer))
            for n, payer in enumerate("aaaaaaaabbbbcccc")
        ]
        await asyncio.sleep(0)  # each runs until it waits for a look-up thread
        with pytest.raises(LookupRefused):
            await directory.path_of_soon(made_up + 100, payer="a")
        with pytest.raises(LookupRefused):
            await directory.path_of_soon(made_up + 101, payer="e")
        assert await directory.path_of_soon(world.project_id, payer="e") == known
        gate.set()
        return list(await asyncio.gather(*waiting)), known

    try:
        answers, known = asyncio.run(scenario())
    finally:
        gate.set()
        directory.close()
        client.close()

    assert known == world.project_path
    assert answers == [None] * 16  # GitLab shows no such projects
    assert simulator.request_count("GET", "/projects/:id") == 17


def test_deliveries_asking_one_question_at_once_share_one_look_up(simulator, world):
    """A burst of hooks for a project not held yet (after a restart): one GitLab call, one
    place in the wait, one look-up from the budget, and every delivery gets the answer."""
    gate = threading.Event()
    client = GitLabClient(simulator.url, TOKEN, timeout=5)

    def held_project(reference: str):
        gate.wait(30)
        return client.project(reference)

    directory = ProjectDirectory([held_project], clock=Clock())
    simulator.reset_requests()

    async def scenario() -> list[bool]:
        burst = [
            asyncio.ensure_future(
                directory.same_project_soon(world.project_id, world.project_path, payer="a")
            )
            for _ in range(40)
        ]
        await asyncio.sleep(0)
        gate.set()
        return list(await asyncio.gather(*burst))

    try:
        answers = asyncio.run(scenario())
    finally:
        gate.set()
        directory.close()
        client.close()

    assert answers == [True] * 40
    assert simulator.request_count("GET", "/projects/:id") == 1
