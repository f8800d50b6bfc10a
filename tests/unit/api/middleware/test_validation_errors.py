"""422 bodies render whatever the rejected input held, and stay small."""

from __future__ import annotations

import asyncio
import json

from fastapi.exceptions import RequestValidationError

from workqueue.api.middleware.validation_errors import (
    MAX_ECHOED_CHARS,
    safe_errors,
    validation_error_answer,
)


def rendered(errors) -> list[dict]:
    answer = asyncio.run(validation_error_answer(None, RequestValidationError(errors)))
    assert answer.status_code == 422
    return json.loads(answer.body)["detail"]


def error(value, **extra):
    return {"type": "bool_type", "loc": ("body", "close_mr"), "msg": "bad", "input": value, **extra}


def test_non_finite_floats_are_echoed_as_their_names():
    inputs = [
        item["input"]
        for item in rendered([error(float("nan")), error(float("inf")), error(-float("inf"))])
    ]

    assert inputs == ["NaN", "Infinity", "-Infinity"]


def test_bytes_and_lone_surrogates_become_text():
    (binary, surrogate) = rendered(
        [error(b"\xff\xfe\x00ok"), error("a\ud800b", loc=("body", "\udfff"))]
    )

    assert binary["input"] == "\ufffd\ufffd\x00ok"
    assert surrogate["input"] == "a?b"
    assert surrogate["loc"] == ["body", "?"]


def test_long_text_and_huge_numbers_are_cut():
    text, data, number = safe_errors([error("x" * 10_000), error(b"y" * 10_000), error(10**1000)])

    assert text["input"] == "x" * MAX_ECHOED_CHARS + "… (10000 characters)"
    assert data["input"] == "y" * MAX_ECHOED_CHARS + "… (10000 bytes)"
    assert number["input"] == "<integer of 3322 bits>"


def test_containers_are_shown_one_level_deep():
    value = {f"k{n}": {"deep": [1, 2, 3]} for n in range(12)} | {"list": list(range(50))}
    (echoed,) = safe_errors([error(value)])

    assert echoed["input"]["k0"] == "<object with 1 keys>"
    assert echoed["input"]["…"] == "<3 more keys>"
    (listed,) = safe_errors([error(list(range(50)))])
    assert listed["input"] == [*range(10), "<40 more items>"]


def test_context_objects_and_the_number_of_errors_are_bounded():
    errors = [error(1, ctx={"error": ValueError("v" * 1000)}) for _ in range(500)]

    answer = rendered(errors)

    assert len(answer) == 50
    assert answer[0]["ctx"]["error"].startswith("v" * MAX_ECHOED_CHARS + "…")
