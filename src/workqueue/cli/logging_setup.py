"""Process logging: readable text for people, one JSON object per line for collectors."""

from __future__ import annotations

import enum
import json
import logging
import math
import sys
import time
from datetime import UTC, datetime


class LogFormat(enum.StrEnum):
    TEXT = "text"  # for a terminal
    JSON = "json"  # for log collectors: one object per line


class JsonFormatter(logging.Formatter):
    """`{"time", "level", "logger", "message"[, "exception"]}`, `time` in ISO 8601 UTC
    exactly as `datetime.isoformat()` writes it.

    Every request's access line and every audit entry passes through here, so
    the date part of `time` is formatted once per second and one encoder
    serves every line (`json.dumps` with options builds a new one per call).
    """

    def __init__(self) -> None:
        super().__init__()
        # (second, its "YYYY-MM-DDTHH:MM:SS"): replaced as a whole, so threads
        # logging at once never see one's second with another's text.
        self._second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self._utc_time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _ENCODE(entry)

    def _utc_time(self, created: float) -> str:
        # As datetime.fromtimestamp(created, UTC).isoformat(): microseconds
        # rounded half to even, and left out when zero.
        fraction, whole = math.modf(created)
        micros = round(fraction * 1e6)
        if micros >= 1_000_000:
            whole += 1
            micros -= 1_000_000
        if created < 0 or micros < 0:  # before 1970: not worth a fast path
            return datetime.fromtimestamp(created, UTC).isoformat()
        second = int(whole)
        cached = self._second
        if cached[0] != second:
            cached = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
            self._second = cached
        return f"{cached[1]}.{micros:06d}+00:00" if micros else f"{cached[1]}+00:00"


_ENCODE = json.JSONEncoder(default=str).encode


def configure_logging(level: str, log_format: LogFormat = LogFormat.TEXT) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format is LogFormat.JSON:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic announces its context on every readiness probe; that is noise.
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
