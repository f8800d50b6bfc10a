"""Sentry error reports, on when `SENTRY_DSN` is set (the `sentry` extra).

Reported: unhandled exceptions in requests (the 500s; the Starlette/FastAPI
integrations Sentry enables by itself), and log records at ERROR and above
from any thread, the engine's included (Sentry's logging integration).

What never leaves the process: request bodies (a submission carries file
contents), local variables of stack frames (they hold tokens and file
contents), and personal data; the GitLab webhook secret and the forwarded
OpenShift token are scrubbed along with Sentry's default list
(`Authorization`, cookies, ...).
"""

from __future__ import annotations

import logging
from typing import Any

from workqueue import __version__
from workqueue.observability.extras import missing_extra

logger = logging.getLogger(__name__)

VARIABLE = "SENTRY_DSN"
# Header names as Sentry's scrubber sees them: lower case, `-` and `_` both.
SCRUBBED_HEADERS = (
    "x-gitlab-token",
    "x_gitlab_token",
    "x-forwarded-access-token",
    "x_forwarded_access_token",
)


class ErrorReports:
    """The process's Sentry client; `close` sends what is queued and stops reporting."""

    def __init__(self, dsn: str) -> None:
        try:
            # Imported here: the default install has no Sentry SDK.
            import sentry_sdk  # noqa: PLC0415
            from sentry_sdk.scrubber import DEFAULT_DENYLIST, EventScrubber  # noqa: PLC0415
        except ImportError as error:
            raise missing_extra(VARIABLE, "the Sentry SDK", "sentry", error) from None
        self._sdk: Any = sentry_sdk
        sentry_sdk.init(
            dsn=dsn,
            release=f"workqueue-service@{__version__}",
            # Personal data stays out by default (`send_default_pii` unset: the
            # option is deprecated in favour of `data_collection`, which would
            # turn the event scrubber off).
            max_request_body_size="never",
            include_local_variables=False,
            event_scrubber=EventScrubber(denylist=[*DEFAULT_DENYLIST, *SCRUBBED_HEADERS]),
            # Performance data goes through OpenTelemetry, not Sentry.
            traces_sample_rate=None,
        )
        logger.info("error reports: Sentry is on")

    def close(self, timeout: float = 5.0) -> None:
        client = self._sdk.get_client()
        client.close(timeout=timeout)
        # A closed client still answers; an empty one makes every capture a no-op.
        self._sdk.get_global_scope().set_client(None)
