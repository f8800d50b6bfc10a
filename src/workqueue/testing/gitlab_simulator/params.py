"""Coercion of request parameters the way Grape does it.

Query strings carry only strings (python-gitlab sends Python booleans as
`True`/`False`), JSON bodies carry real types, and list parameters arrive either
as arrays or as comma-joined strings; every handler goes through these helpers so
all spellings are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from workqueue.testing.gitlab_simulator.errors import param_error

_TRUE = {"true", "t", "1", "yes", "y", "on"}
_FALSE = {"false", "f", "0", "no", "n", "off", ""}


def to_bool(value: Any) -> bool | None:
    """Grape's Boolean coercion; None when the value is absent or not a boolean."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    return None


def bool_param(params: Mapping[str, Any], name: str) -> bool | None:
    """A declared Boolean parameter: absent → None, unparsable → Grape's 400."""
    if name not in params or params[name] is None:
        return None
    value = to_bool(params[name])
    if value is None:
        raise param_error(f"{name} is invalid")
    return value


def str_param(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def list_param(params: Mapping[str, Any], name: str) -> list[str] | None:
    """`CommaSeparatedToArray`: an array, or one comma-joined string (blank → [])."""
    if name not in params or params[name] is None:
        return None
    value = params[name]
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def parse_form(text: str) -> dict[str, Any]:
    """Query-string or form-encoded pairs: `k[]=a&k[]=b` becomes a list, else last wins."""
    result: dict[str, Any] = {}
    for key, value in parse_qsl(text, keep_blank_values=True):
        if key.endswith("[]"):
            bucket = result.setdefault(key[:-2], [])
            if isinstance(bucket, list):
                bucket.append(value)
        else:
            result[key] = value
    return result


def parse_api_time(value: str) -> datetime:
    """An ISO 8601 time parameter (`updated_after=2025-03-01T10:00:00Z`); 400 otherwise."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise param_error("updated_after is invalid") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
