"""`classify`: python-gitlab and requests exceptions → Retryable/Permanent GitLab errors."""

from __future__ import annotations

import email.utils

import gitlab
import pytest
import requests

from workqueue.gitlab import (
    GitLabError,
    PermanentGitLabError,
    ResponseShapeError,
    RetryableGitLabError,
    classify,
    retry_after_seconds,
)
from workqueue.queue.errors import PermanentError

R, P = RetryableGitLabError, PermanentGitLabError
ex = gitlab.exceptions

# (exception, headers, expected class, status, message, retry_after)
CASES = [
    (ex.GitlabHttpError("500 Internal Server Error", 500), {}, R, 500, None, None),
    (
        ex.GitlabHttpError(b"<html>bad gateway</html>", 502),
        {},
        R,
        502,
        "<html>bad gateway</html>",
        None,
    ),
    (ex.GitlabGetError("", 503), {"Retry-After": "3"}, R, 503, "503 Service Unavailable", 3.0),
    (ex.GitlabHttpError("Retry later\n", 429), {"Retry-After": "7"}, R, 429, "Retry later", 7.0),
    (ex.GitlabHttpError("Retry later\n", 429), {}, R, 429, "Retry later", None),
    (ex.GitlabGetError("408 Request Timeout", 408), {}, R, 408, None, None),
    (ex.GitlabCreateError("Resource lock held", 409), {}, R, 409, None, None),
    (
        ex.GitlabCreateError(
            "Could not update refs/heads/bot/x. Please refresh and try again.", 400
        ),
        {},
        R,
        400,
        None,
        None,
    ),
    (ex.GitlabCreateError("A file with this name already exists", 400), {}, P, 400, None, None),
    (ex.GitlabCreateError("A file with this name doesn't exist", 400), {}, P, 400, None, None),
    (
        ex.GitlabCreateError({"title": ["can't be blank"]}, 400),
        {},
        P,
        400,
        "title can't be blank",
        None,
    ),
    (ex.GitlabCreateError("source_branch is missing", 400), {}, P, 400, None, None),
    (ex.GitlabAuthenticationError("401 Unauthorized", 401), {}, P, 401, None, None),
    (
        ex.GitlabCreateError("403 Forbidden - You are not allowed to push into this branch", 403),
        {},
        P,
        403,
        None,
        None,
    ),
    (ex.GitlabGetError("404 Branch Not Found", 404), {}, P, 404, None, None),
    (ex.GitlabMRClosedError("405 Method Not Allowed", 405), {}, P, 405, None, None),
    (ex.GitlabMRClosedError("Branch cannot be merged", 406), {}, P, 406, None, None),
    (
        ex.GitlabCreateError(
            ["Another open merge request already exists for this source branch: !7"], 409
        ),
        {},
        P,
        409,
        "Another open merge request already exists for this source branch: !7",
        None,
    ),
    (
        ex.GitlabMRClosedError("SHA does not match HEAD of source branch: abc", 409),
        {},
        P,
        409,
        None,
        None,
    ),
    (ex.GitlabMRClosedError("Branch cannot be merged", 422), {}, P, 422, None, None),
    # A Retry-After on a permanent refusal does not make it retryable.
    (ex.GitlabGetError("404 Not found", 404), {"Retry-After": "5"}, P, 404, None, None),
    (requests.exceptions.ConnectionError("refused"), {}, R, None, "ConnectionError: refused", None),
    (requests.exceptions.ConnectTimeout("slow"), {}, R, None, "ConnectTimeout: slow", None),
    (requests.exceptions.ReadTimeout("slow"), {}, R, None, "ReadTimeout: slow", None),
    (requests.exceptions.ChunkedEncodingError("cut"), {}, R, None, None, None),
    (
        ex.GitlabParsingError("Failed to parse the server message"),
        {},
        R,
        None,
        "GitLab answered with a body that is not valid JSON",
        None,
    ),
    (requests.exceptions.InvalidURL("no"), {}, P, None, "InvalidURL: no", None),
    (requests.exceptions.MissingSchema("no"), {}, P, None, None, None),
    (requests.exceptions.TooManyRedirects("loop"), {}, P, None, None, None),
    (
        ex.RedirectError("moved"),
        {},
        P,
        None,
        "redirected (moved): check the GitLab base URL",
        None,
    ),
    (ResponseShapeError("project.id: expected an integer"), {}, P, None, None, None),
    (RuntimeError("boom"), {}, P, None, "RuntimeError: boom", None),
]


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{type(case[0]).__name__}-{case[3]}-{n}" for n, case in enumerate(CASES)]
)
def test_classification_table(case):
    exc, headers, kind, status, message, retry_after = case
    error = classify(exc, headers=headers, operation="op.name")
    assert type(error) is kind
    assert error.status == status
    assert error.retry_after == retry_after
    assert error.operation == "op.name"
    expected_message = message if message is not None else getattr(exc, "error_message", None)
    if expected_message is not None:
        assert error.message == expected_message
    assert error.message
    assert isinstance(error, PermanentError) == (kind is P)


def test_a_gitlab_error_passes_through_unchanged():
    original = PermanentGitLabError("x", status=404)
    assert classify(original) is original


def test_str_and_repr_carry_status_operation_and_message():
    error = classify(
        ex.GitlabCreateError("A file with this name already exists", 400),
        operation="commits.create",
    )
    assert str(error) == "GitLab commits.create: 400 A file with this name already exists"
    assert repr(error) == (
        "PermanentGitLabError(status=400, message='A file with this name already exists', "
        "retry_after=None, operation='commits.create')"
    )
    # GitLab's messages often start with the status already: not repeated.
    assert (
        str(classify(ex.GitlabGetError("404 Branch Not Found", 404)))
        == "GitLab: 404 Branch Not Found"
    )


def test_reason_phrase_marks_a_resource_lock_409_transient():
    error = classify(ex.GitlabCreateError("409 Conflict", 409), reason="Resource lock")
    assert isinstance(error, RetryableGitLabError)


def test_secrets_are_redacted_in_every_form_and_before_truncation():
    secret = "glpat-a/b+c"
    body = f"bad token {secret} or {requests.utils.quote(secret, safe='')}"
    error = classify(ex.GitlabHttpError(body, 400), secrets=[secret])
    assert secret not in str(error)
    assert "glpat-a%2Fb%2Bc" not in str(error)
    assert error.message == "bad token [REDACTED] or [REDACTED]"

    long = "x" * 995 + secret
    cut = classify(ex.GitlabHttpError(long, 400), secrets=[secret])
    assert "glpat" not in cut.message
    assert len(cut.message) <= 1000

    transport = classify(
        requests.exceptions.ConnectionError(f"url?private_token={secret}"), secrets=[secret]
    )
    assert secret not in repr(transport)


def test_retry_after_parsing():
    now = 1_700_000_000.0
    assert retry_after_seconds({"Retry-After": "7"}, now=now) == 7.0
    assert retry_after_seconds({"retry-after": " 1.5 "}, now=now) == 1.5
    assert retry_after_seconds({"Retry-After": "-3"}, now=now) == 0.0
    http_date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds({"Retry-After": http_date}, now=now) == pytest.approx(30.0)
    assert retry_after_seconds({"Retry-After": "soon"}, now=now) is None
    assert retry_after_seconds({"RateLimit-Reset": str(int(now + 12))}, now=now) == 12.0
    assert retry_after_seconds({"RateLimit-Reset": str(int(now - 12))}, now=now) == 0.0
    assert retry_after_seconds({}, now=now) is None


def test_hierarchy():
    assert issubclass(RetryableGitLabError, GitLabError)
    assert issubclass(PermanentGitLabError, GitLabError)
    assert issubclass(PermanentGitLabError, PermanentError)
    assert not issubclass(RetryableGitLabError, PermanentError)
