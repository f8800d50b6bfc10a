"""The JSON log formatter: one object per line with time, level, logger, message and
exception, `time` written exactly as `datetime.isoformat()` in UTC would write it."""

from __future__ import annotations

import json
import logging
import random
import sys
from datetime import UTC, datetime

import pytest

from workqueue.cli.logging_setup import JsonFormatter


def record(
    created: float, message: str = "m %s", *args: object, **extra: object
) -> logging.LogRecord:
    line = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, message, args, None)
    line.created = created
    for name, value in extra.items():
        setattr(line, name, value)
    return line


@pytest.mark.parametrize(
    "created",
    [
        0.0,
        1.0,
        1_796_140_800.0,  # a whole second: no fraction written
        1_796_140_800.5,
        1_796_140_800.123456,
        1_796_140_800.9999996,  # rounds up into the next second
        1_796_140_800.0000005,  # half a microsecond: to even
        1_796_140_800.0000015,
        1_796_140_859.999999,
        4_102_444_799.999999,
        -1.5,
    ],
)
def test_the_time_is_isoformat_in_utc(created):
    line = json.loads(JsonFormatter().format(record(created, "x")))

    assert line["time"] == datetime.fromtimestamp(created, UTC).isoformat()


def test_times_across_many_seconds_match_isoformat():
    formatter = JsonFormatter()
    generator = random.Random(7)  # noqa: S311 - times, not secrets
    start = 1_796_140_800.0
    times = sorted(start + generator.uniform(0, 5) for _ in range(2000))
    times += [start + generator.uniform(-1e6, 1e6) for _ in range(2000)]  # jumping about
    for created in times:
        assert json.loads(formatter.format(record(created)))["time"] == (
            datetime.fromtimestamp(created, UTC).isoformat()
        ), created


def test_a_line_holds_level_logger_message_and_the_exception():
    formatter = JsonFormatter()
    try:
        int("boom")
    except ValueError:
        failure = record(1_796_140_800.25, "failed %s %d", '"quoted" ✓', 3, exc_info=sys.exc_info())
    failure.levelname = "ERROR"

    line = json.loads(formatter.format(failure))

    assert list(line) == ["time", "level", "logger", "message", "exception"]
    assert line["level"] == "error"
    assert line["logger"] == "uvicorn.access"
    assert line["message"] == 'failed "quoted" ✓ 3'
    assert "ValueError: invalid literal" in line["exception"]
    assert "exception" not in json.loads(formatter.format(record(1.0)))


def test_a_message_argument_that_is_no_string_is_formatted_with_str():
    class Odd:
        def __str__(self) -> str:
            return "odd"

    line = json.loads(JsonFormatter().format(record(1.0, "%s", Odd())))

    assert line["message"] == "odd"
