"""Comparing a webhook body built by the simulator with a fixture of a real body's shape."""

from __future__ import annotations

from typing import Any


def assert_shape(actual: Any, expected: Any, where: str = "payload") -> None:
    """Every key of the real payload exists, recursively, with the same JSON type when set."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where} should be an object"
        missing = sorted(set(expected) - set(actual))
        assert not missing, f"{where} lacks {missing}"
        for key, value in expected.items():
            assert_shape(actual[key], value, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{where} should be an array"
        if expected and actual:
            assert_shape(actual[0], expected[0], f"{where}[0]")
    elif expected is not None and actual is not None:
        numbers = (int, float)
        if isinstance(expected, numbers) and not isinstance(expected, bool):
            assert isinstance(actual, numbers), where
            assert not isinstance(actual, bool), where
        else:
            assert type(actual) is type(expected), f"{where}: {actual!r} vs {expected!r}"
