"""GitLab's error responses, with the exact shapes and messages its API helpers produce.

`render_api_error!` gives `{"message": ...}`; Grape parameter validation gives
`{"error": ...}`. The helper names mirror `lib/api/helpers.rb` so handlers read
like the Ruby they imitate.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Raised by a handler to answer with a GitLab error; the state lock is released first."""

    def __init__(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body
        self.headers = headers or {}


def api_error(status: int, message: Any) -> ApiError:
    """`render_api_error!(message, status)`: the message may be a string, list or dict."""
    return ApiError(status, {"message": message})


def bad_request(reason: str | None = None) -> ApiError:
    """`bad_request!(reason)` → `400 Bad request - reason`."""
    text = "400 Bad request" if reason is None else f"400 Bad request - {reason}"
    return api_error(400, text)


def forbidden(reason: str | None = None) -> ApiError:
    """`forbidden!(reason)` → `403 Forbidden - reason`."""
    text = "403 Forbidden" if reason is None else f"403 Forbidden - {reason}"
    return api_error(403, text)


def not_found(resource: str | None = None) -> ApiError:
    """`not_found!("Branch")` → `404 Branch Not Found`."""
    text = "404 Not Found" if resource is None else f"404 {resource} Not Found"
    return api_error(404, text)


def record_not_found() -> ApiError:
    """`ActiveRecord::RecordNotFound` (missing MR iid, job, pipeline): lowercase "found"."""
    return api_error(404, "404 Not found")


def unauthorized() -> ApiError:
    return api_error(401, "401 Unauthorized")


def not_allowed() -> ApiError:
    return api_error(405, "405 Method Not Allowed")


def conflict(message: Any) -> ApiError:
    return api_error(409, message)


def param_error(message: str) -> ApiError:
    """Grape's own validation failure (missing or invalid declared parameter)."""
    return ApiError(400, {"error": message})


def missing_params(*names: str) -> ApiError:
    """Grape joins every missing `requires` parameter into one message."""
    return param_error(", ".join(f"{name} is missing" for name in names))
