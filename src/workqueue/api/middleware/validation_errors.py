"""422 answers in FastAPI's shape that can always be sent, whatever the input was.

FastAPI's own handler echoes each error's `input` as it came. That input is
untrusted: a non-finite float makes the answer unrenderable (a 500), bytes
that are not UTF-8 fail to encode (a 500), and a 16 MiB field comes back
whole. Here every echoed value is made finite, decodable and small: strings
are cut to `MAX_ECHOED_CHARS`, only the top level of a container is shown,
and at most `MAX_ERRORS` errors are listed. Free text GitLab would publish (file
`content`, `title`, `description`, `commit_message`) is never echoed, only described:
it may hold a secret, and a 422 may end up in a log the whole project can read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

MAX_ECHOED_CHARS = 200
MAX_ECHOED_ITEMS = 10
MAX_ERRORS = 50
_MAX_ECHOED_INT_BITS = 640  # about 190 decimal digits
_UNECHOED_FIELDS = frozenset({"content", "title", "description", "commit_message"})


async def validation_error_answer(request: Request, error: Exception) -> JSONResponse:
    """The handler for RequestValidationError."""
    del request
    errors = error.errors() if isinstance(error, RequestValidationError) else []
    return JSONResponse({"detail": safe_errors(errors)}, status_code=422)


def safe_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    return [_safe_error(error) for error in list(errors)[:MAX_ERRORS]]


def _safe_error(error: Any) -> dict[str, Any]:
    if not isinstance(error, Mapping):
        return {"loc": [], "msg": _text(str(error)), "type": "value_error"}
    safe: dict[str, Any] = {}
    for key, value in error.items():
        name = _text(str(key))
        if name == "loc":
            safe[name] = [_location_part(part) for part in _as_list(value)]
        elif name == "input":
            location = _as_list(error.get("loc"))
            about_free_text = bool(location) and location[-1] in _UNECHOED_FIELDS
            safe[name] = _shape(value) if about_free_text else _echo(value, top_level=True)
        elif name == "ctx" and isinstance(value, Mapping):
            # Context values may be exception objects (a validator's ValueError).
            safe[name] = {_text(str(k)): _scalar(v) for k, v in list(value.items())[:10]}
        else:
            safe[name] = _scalar(value)
    return safe


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _location_part(part: Any) -> str | int:
    if isinstance(part, int) and not isinstance(part, bool):
        return part
    return _text(str(part))  # e.g. an unknown key the caller chose


def _echo(value: Any, *, top_level: bool) -> Any:
    """`value` as far as it is safe and short to show; containers only at the top level."""
    if isinstance(value, Mapping):
        if not top_level:
            return f"<object with {len(value)} keys>"
        shown = list(value.items())[:MAX_ECHOED_ITEMS]
        echoed = {
            _text(str(key)): _shape(item)
            if key in _UNECHOED_FIELDS
            else _echo(item, top_level=False)
            for key, item in shown
        }
        if len(value) > MAX_ECHOED_ITEMS:
            echoed["…"] = f"<{len(value) - MAX_ECHOED_ITEMS} more keys>"
        return echoed
    if isinstance(value, list | tuple):
        if not top_level:
            return f"<array of {len(value)} items>"
        items = [_echo(item, top_level=False) for item in value[:MAX_ECHOED_ITEMS]]
        if len(value) > MAX_ECHOED_ITEMS:
            items.append(f"<{len(value) - MAX_ECHOED_ITEMS} more items>")
        return items
    return _scalar(value)


def _shape(value: Any) -> Any:
    """What `value` is, without what it says."""
    if isinstance(value, str):
        return f"<text of {len(value)} characters>"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if isinstance(value, Mapping | list | tuple):
        return _echo(value, top_level=False)
    return _scalar(value)


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, bool | str):
        return _text(value) if isinstance(value, str) else value
    if isinstance(value, int):
        big = value.bit_length() > _MAX_ECHOED_INT_BITS  # str() of it may even raise
        return f"<integer of {value.bit_length()} bits>" if big else value
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return _bytes_text(value)
    if isinstance(value, Mapping | list | tuple):
        return _echo(value, top_level=False)
    return _text(str(value))


def _finite(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _bytes_text(value: bytes | bytearray | memoryview) -> str:
    head = bytes(value[: MAX_ECHOED_CHARS * 4]).decode("utf-8", "replace")
    if len(value) > MAX_ECHOED_CHARS * 4 or len(head) > MAX_ECHOED_CHARS:
        return _utf8(f"{head[:MAX_ECHOED_CHARS]}… ({len(value)} bytes)")
    return _utf8(head)


def _text(text: str) -> str:
    """At most MAX_ECHOED_CHARS characters (and a note of the full length), as UTF-8."""
    if len(text) > MAX_ECHOED_CHARS:
        text = f"{text[:MAX_ECHOED_CHARS]}… ({len(text)} characters)"
    return _utf8(text)


def _utf8(text: str) -> str:
    """Lone surrogates (from `\\ud800` escapes) cannot be encoded: replace them."""
    return text.encode("utf-8", "replace").decode("utf-8")
