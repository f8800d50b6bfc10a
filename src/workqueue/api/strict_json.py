"""Strict JSON for request bodies, and the check that applies it to API routes.

`json.loads` on bytes is lenient exactly where a trust boundary must not be:
it guesses UTF-16/32 from the first bytes, accepts `NaN` and `Infinity`
(which JSONB, `JSONResponse` and most other parsers refuse, so the input
turned into 500s further in), reads `1e400` as infinity, and nests until
RecursionError. `parse_strict_json` accepts RFC 8259 JSON in UTF-8 only, with
finite numbers and at most `MAX_DEPTH` levels of nesting.

Every JSON body goes through it: API routes' bodies in the body reader
(`StrictJSONBodies`, a 422 in FastAPI's shape, before FastAPI parses them
again with the very same result), the webhook receiver's in its route (a 400,
after its token check).
"""

from __future__ import annotations

import email.message
import json
import math
from collections.abc import Collection
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from workqueue.api.asgi import header, route_path

MAX_DEPTH = 64
# Above this size the parse runs in a worker thread, not in the event loop.
_INLINE_PARSE_BYTES = 256 * 1024


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


def is_json_media_type(content_type: str | None) -> bool:
    """Whether FastAPI parses a body with this Content-Type as JSON (absent counts here too).

    The same parsing FastAPI uses, so both always agree on what is JSON.
    """
    if not content_type:
        return True
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


class StrictJSONBodies:
    """The body reader's check for API routes: a JSON body that is not strict JSON is a 422.

    Applies under `path_prefix` except `exempt_paths` (routes that parse their
    body themselves); bodies with a non-JSON Content-Type are FastAPI's to refuse.
    """

    def __init__(self, *, path_prefix: str, exempt_paths: Collection[str] = ()) -> None:
        self.path_prefix = path_prefix
        self.exempt_paths = frozenset(exempt_paths)

    async def __call__(self, scope: Scope, body: bytes) -> Response | None:
        path = route_path(scope)
        if not body or not path.startswith(self.path_prefix) or path in self.exempt_paths:
            return None
        if not is_json_media_type(header(scope, b"content-type")):
            return None
        try:
            if len(body) > _INLINE_PARSE_BYTES:
                await run_in_threadpool(parse_strict_json, body)
            else:
                parse_strict_json(body)
        except InvalidJSONError as error:
            return JSONResponse({"detail": [json_invalid_error(error)]}, status_code=422)
        return None


def json_invalid_error(error: InvalidJSONError) -> dict[str, Any]:
    """The entry FastAPI itself reports for a body that does not parse."""
    location: list[str | int] = ["body"]
    if error.position is not None:
        location.append(error.position)
    return {
        "type": "json_invalid",
        "loc": location,
        "msg": "JSON decode error",
        "input": {},
        "ctx": {"error": error.reason},
    }
