"""The copy of an event body stored as JSONB: cleaned, and built without recursion."""

from __future__ import annotations

import math

from workqueue.queue.intake.pending_events import jsonb_safe as _jsonb_safe


def test_a_body_nested_ten_thousand_levels_is_copied():
    body: dict = {"leaf": "x\x00y"}
    for _ in range(10_000):
        body = {"next": [body]}

    copy = _jsonb_safe(body)

    for _ in range(10_000):
        assert list(copy) == ["next"]
        (copy,) = copy["next"]
    assert copy == {"leaf": "xy"}


def test_strings_floats_and_key_order_are_made_storable():
    body = {"b\x00": 1, "a": [math.inf, -math.inf, math.nan, 1.5, "\ud800"], "c": None, "b": 2}

    copy = _jsonb_safe(body)

    assert list(copy) == ["b", "a", "c"]
    assert copy["b"] == 2  # "b\x00" cleans to "b": as with a dict display, the last one wins
    assert copy["a"] == [None, None, None, 1.5, "?"]
    assert copy["c"] is None
