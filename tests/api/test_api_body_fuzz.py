"""Property-based fuzz of the raw bytes of every POST route.

Hypothesis builds hostile bodies from valid ones (non-standard JSON tokens,
invalid UTF-8, other encodings, deep nesting, huge numbers, truncation) and
sends them, and valid bodies under wrong content types, and plain random
bytes. Every answer must be a 4xx, or a 2xx for a valid webhook; never a 5xx
or a dropped connection, and the service answers /healthz afterwards.
Derandomized, so CI runs the same few hundred cases every time.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from api_harness import build_client
from databases import create_database_from, drop_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mr_harness import FILES, PROJECT, TOKEN

from workqueue.testing.gitlab_simulator import GitLabSimulator

SECRET = "fuzz-secret"
SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/fuzz",
    "title": "Fuzz",
    "commit_message": "m",
    "labels": ["bot"],
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "v\n"}],
}
PUSH_HOOK = {
    "object_kind": "push",
    "ref": "refs/heads/main",
    "project": {"id": 1, "path_with_namespace": PROJECT},
    "commits": [{"id": "0" * 40, "message": "m"}],
}
VALID_BODIES = {
    "submit": json.dumps(SUBMIT),
    "retry": json.dumps({}),
    "cancel": json.dumps({"close_mr": False}),
    "webhook": json.dumps(PUSH_HOOK),
}

NON_STANDARD_TOKENS = [
    "NaN",
    "-NaN",
    "Infinity",
    "-Infinity",
    "+Infinity",
    "1e400",
    "-1e400",
    "1E99999",
    "0x10",
    "+1",
    "01",
    ".5",
    "1.",
    "'single'",
    "undefined",
    "True",
    "None",
    "/* comment */ 1",
    "1_000",
    '"\\x41"',
    '"tab\tinside"',
]
INVALID_UTF8 = [
    b"\xff",
    b"\xfe\xff",
    b"\xc3(",
    b"\xa0\xa1",
    b"\xe2\x28\xa1",
    b"\xf0\x28\x8c\xbc",
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xf4\x90\x80\x80",  # above U+10FFFF
    b"\xc0\xaf",  # overlong
    b"\x80",
    b"\xf8\x88\x80\x80\x80",
]
OTHER_ENCODINGS = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]
JSON_CONTENT_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "application/merge-patch+json",
    None,
]
OTHER_CONTENT_TYPES = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "application/xml",
    "application/octet-stream",
    "json",
    ";;;",
]


@dataclass(frozen=True)
class Case:
    body: bytes
    content_type: str | None
    kind: str  # "hostile" (not strict JSON), "wrong type" (valid JSON, other type), "random"


def with_field(text: str, raw_value: str) -> str:
    return text[:-1] + f', "fuzz": {raw_value}}}'


def hostile_body(valid: str) -> st.SearchStrategy[bytes]:
    """`valid` made into something strict JSON refuses, one way or another."""
    raw = valid.encode()
    nesting = st.sampled_from([("[", "]"), ('{"a":', "}"), ('[{"a":', "}]")])
    numbers = st.one_of(
        st.integers(309, 10**6).map(lambda exponent: f"1e{exponent}"),
        st.integers(309, 10**6).map(lambda exponent: f"-9.9E+{exponent}"),
        st.integers(4301, 20_000).map(lambda digits: "7" * digits),  # over Python's int limit
    )
    return st.one_of(
        st.builds(
            lambda token, wrap: with_field(valid, wrap.format(token)).encode(),
            st.sampled_from(NON_STANDARD_TOKENS),
            st.sampled_from(["{}", "[{}]", '{{"k": [1, {}]}}']),
        ),
        st.builds(
            lambda at, bad: raw[:at] + bad + raw[at:],
            st.integers(1, len(raw) - 1),
            st.sampled_from(INVALID_UTF8),
        ),
        st.sampled_from(OTHER_ENCODINGS).map(valid.encode),
        st.just(b"\xef\xbb\xbf" + raw),  # a UTF-8 byte order mark
        st.builds(
            lambda depth, pair: with_field(valid, pair[0] * depth + "1" + pair[1] * depth).encode(),
            st.integers(65, 5000),
            nesting,
        ),
        numbers.map(lambda number: with_field(valid, number).encode()),
        st.integers(1, len(raw) - 1).map(lambda end: raw[:end]),  # truncated
    )


@st.composite
def cases(draw: st.DrawFn, route: str) -> Case:
    valid = VALID_BODIES[route]
    kind = draw(st.sampled_from(["hostile", "hostile", "hostile", "wrong type", "random"]))
    if kind == "hostile":
        return Case(draw(hostile_body(valid)), draw(st.sampled_from(JSON_CONTENT_TYPES)), kind)
    if kind == "wrong type":
        return Case(valid.encode(), draw(st.sampled_from(OTHER_CONTENT_TYPES)), kind)
    content_type = draw(st.sampled_from([*JSON_CONTENT_TYPES, *OTHER_CONTENT_TYPES]))
    return Case(draw(st.binary(min_size=1, max_size=512)), content_type, kind)


@pytest.fixture(scope="module")
def service(server_url, template_url) -> Iterator[tuple[httpx.Client, str]]:
    """One service for all examples (items are not processed), and an active item's id."""
    url = create_database_from(server_url, template_url.database)
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    simulator.create_project(PROJECT, FILES)
    try:
        with build_client(url, simulator, webhook_secret=SECRET, process_items=False) as client:
            created = client.post("/api/work-items/mr", json=SUBMIT)
            assert created.status_code == 201, created.text
            yield client, created.json()["id"]
    finally:
        simulator.stop()
        drop_database(server_url, url)


def target(route: str, item_id: str) -> tuple[str, dict[str, str]]:
    if route == "submit":
        return "/api/work-items/mr", {}
    if route == "retry":
        return f"/api/work-items/{item_id}/retry", {}  # active: a valid call is a 409
    if route == "cancel":
        return f"/api/work-items/{uuid.uuid4()}/cancel", {}  # unknown: a valid call is a 404
    return "/api/webhooks/gitlab", {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook"}


def expected_statuses(route: str, case: Case) -> set[int]:
    if route == "webhook":
        return (
            # 422: a body whose project id and path name different projects on GitLab.
            {200, 422}
            if case.kind == "wrong type"
            else ({200, 400, 422} if case.kind == "random" else {400})
        )
    if case.kind == "hostile":
        return {422}  # the strict JSON check, before any route logic
    return set(range(400, 500))


@pytest.mark.parametrize("route", ["submit", "retry", "cancel", "webhook"])
def test_hostile_bytes_never_make_a_server_error(service, route):
    client, item_id = service
    seen: list[int] = []

    @given(case=cases(route))
    @settings(
        max_examples=100,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    def answers_4xx(case: Case) -> None:
        path, headers = target(route, item_id)
        if case.content_type is not None:
            headers = {**headers, "content-type": case.content_type}
        answer = client.post(path, content=case.body, headers=headers)
        seen.append(answer.status_code)
        assert answer.status_code in expected_statuses(route, case), (
            f"{route} {case}: {answer.status_code} {answer.text[:300]}"
        )
        assert isinstance(
            answer.json()["detail" if answer.status_code >= 400 else "status"], str | list
        )

    answers_4xx()

    print(f"{route}: {len(seen)} requests, statuses {sorted(set(seen))}")
    assert len(seen) >= 100
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get(f"/api/work-items/{item_id}").json()["phase"] == "active"
