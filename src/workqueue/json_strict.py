"""Strict JSON text: RFC 8259 in UTF-8 only, finite numbers, bounded nesting.

`json.loads` on bytes is lenient exactly where a trust boundary must not be:
it guesses UTF-16/32 from the first bytes, accepts `NaN` and `Infinity`
(which JSONB and most other parsers refuse), reads `1e400` as infinity, and
nests until RecursionError. Every JSON document that comes from outside (API
bodies, webhooks, SQS messages) is read with `parse_strict_json`. Pure and
dependency-free, so the HTTP layer and the generic engine's ingest share it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from typing import Any

MAX_DEPTH = 64


class InvalidJSONError(ValueError):
    """The body is not strict JSON; `position` is a character (or byte) offset when known."""

    def __init__(self, reason: str, position: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.position = position


def parse_strict_json(raw: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """The value of the UTF-8 JSON document `raw`, or InvalidJSONError saying why not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidJSONError("the body is not valid UTF-8", error.start) from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as error:
        raise InvalidJSONError(error.msg, error.pos) from None
    except RecursionError:
        raise InvalidJSONError(f"nested deeper than {max_depth} levels") from None
    except ValueError as error:  # our hooks, and integers over Python's digit limit
        raise InvalidJSONError(str(error)) from None
    # Counting brackets is C-fast and bounds the depth: only then is a walk needed.
    if text.count("[") + text.count("{") > max_depth and _depth(value) > max_depth:
        raise InvalidJSONError(f"nested deeper than {max_depth} levels")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(f"number out of range: {literal[:40]}")
    return number


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, level = stack.pop()
        if isinstance(current, dict):
            children: Collection[Any] = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest
