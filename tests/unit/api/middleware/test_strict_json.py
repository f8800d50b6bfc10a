"""`parse_strict_json`: RFC 8259 JSON in UTF-8, finite numbers, bounded nesting."""

from __future__ import annotations

import json

import pytest

from workqueue.api.middleware.strict_json import MAX_DEPTH, InvalidJSONError, parse_strict_json


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"a": [1, 2.5, -1e308, true, null, "\\u00e9\\ud83d\\ude00"]}', None),
        (b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, None),
        (b'"' + b"[" * 5000 + b'"', "[" * 5000),  # brackets inside a string do not nest
        (b"1" * 4300, int("1" * 4300)),
        ('{"t": "caf\u00e9"}'.encode(), {"t": "caf\u00e9"}),
    ],
)
def test_strict_json_is_accepted(raw, expected):
    assert parse_strict_json(raw) == (json.loads(raw) if expected is None else expected)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"NaN", "NaN is not a JSON number"),
        (b"[Infinity]", "Infinity is not a JSON number"),
        (b'{"a": -Infinity}', "-Infinity is not a JSON number"),
        (b"1e309", "number out of range"),
        (b"[-1e400]", "number out of range"),
        (b"1" * 4301, "Exceeds the limit"),
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "nested deeper than 64 levels"),
        (b'{"a":' * 65 + b"1" + b"}" * 65, "nested deeper than 64 levels"),
        (b"[" * 100_000, "nested deeper than 64 levels"),
        (b"\xff", "not valid UTF-8"),
        ('{"a": 1}'.encode("utf-16"), "not valid UTF-8"),
        ('{"a": 1}'.encode("utf-16-le"), "Expecting"),
        ('{"a": 1}'.encode("utf-32-be"), "Expecting"),
        (b"\xef\xbb\xbf{}", "BOM"),
        (b'{"a": 1', "Expecting"),
        (b"", "Expecting value"),
        (b"{} {}", "Extra data"),
    ],
)
def test_anything_else_is_refused_with_a_reason(raw, reason):
    with pytest.raises(InvalidJSONError) as refused:
        parse_strict_json(raw)

    assert reason in refused.value.reason


def test_the_position_of_a_syntax_error_is_kept():
    with pytest.raises(InvalidJSONError) as refused:
        parse_strict_json(b'{"a": tru}')

    assert refused.value.position == 6
