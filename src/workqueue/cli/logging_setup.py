"""Process logging: readable text for people, one JSON object per line for collectors."""

from __future__ import annotations

import enum
import json
import logging
import sys
from datetime import UTC, datetime


class LogFormat(enum.StrEnum):
    TEXT = "text"  # for a terminal
    JSON = "json"  # for log collectors: one object per line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


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
