"""Strict JSON for request bodies: the check that applies `json_strict` to API routes.

Every JSON body goes through `parse_strict_json` (UTF-8 only, finite numbers,
bounded nesting; see `workqueue.json_strict`): API routes' bodies in the
body reader (`StrictJSONBodies`, a 422 in FastAPI's shape, before FastAPI
parses them again with the very same result), the webhook receiver's in its
route (a 400, after its token check), SQS messages in the consumer.
"""

from __future__ import annotations

import email.message
from collections.abc import Collection
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from workqueue.api.middleware.asgi import header, route_path
from workqueue.json_strict import MAX_DEPTH, InvalidJSONError, parse_strict_json

__all__ = ["MAX_DEPTH", "InvalidJSONError", "StrictJSONBodies", "parse_strict_json"]

# Above this size the parse runs in a worker thread, not in the event loop.
_INLINE_PARSE_BYTES = 256 * 1024


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
