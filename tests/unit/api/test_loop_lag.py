"""`api.loop_lag.LoopLag`: how late a real event loop wakes."""

from __future__ import annotations

import asyncio
import time

from workqueue.api.loop_lag import TICK_SECONDS, LoopLag


def test_a_blocked_loop_shows_its_lag_and_an_idle_one_none():
    async def scenario() -> tuple[float, float, float]:
        lag = LoopLag()
        lag.start()
        await asyncio.sleep(TICK_SECONDS * 5)
        idle = lag()
        time.sleep(0.1)  # noqa: ASYNC251 - the point: the loop is busy, its tick wakes late
        await asyncio.sleep(0)
        await asyncio.sleep(TICK_SECONDS / 2)
        blocked = lag()
        await lag.stop()
        return idle, blocked, lag()

    idle, blocked, stopped = asyncio.run(scenario())
    assert idle < 0.05
    assert blocked >= 0.05
    assert stopped == 0.0


def test_with_no_request_in_flight_there_is_no_lag_to_give_way_to():
    in_flight = [0]

    async def scenario() -> tuple[float, float]:
        lag = LoopLag(in_flight=lambda: in_flight[0])
        lag.start()
        await asyncio.sleep(TICK_SECONDS * 2)
        time.sleep(0.1)  # noqa: ASYNC251 - the loop is busy, its tick wakes late
        await asyncio.sleep(0)
        await asyncio.sleep(TICK_SECONDS / 2)
        idle = lag()
        in_flight[0] = 1
        serving = lag()
        await lag.stop()
        return idle, serving

    idle, serving = asyncio.run(scenario())
    assert idle == 0.0
    assert serving >= 0.05
