"""The `Authorization` header: strict Bearer parsing, the local dev user, and no token leaks."""

from __future__ import annotations

import logging

import pytest
from auth_support import claims_for, issuer_rule, sign

from workqueue.auth import AuthenticationError, bearer_token


@pytest.mark.parametrize(
    "header",
    [
        "",
        "   ",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Token abc.def.ghi",
        "Bearerabc.def.ghi",
        "Bearer abc def",
        "Bearer abc,def",
        "Bearer ab\tc",
        'Bearer "abc"',
        "Bearer abc=def",
        "Bearer abc\r\nX-Forwarded-User: admin",
        "Bearer " + "a" * (16 * 1024 + 1),
    ],
)
def test_malformed_authorization_headers_are_rejected(make_authenticator, header):
    authenticator = make_authenticator([])
    with pytest.raises(AuthenticationError):
        authenticator.authenticate(header)


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc.DEF-_.ghi", "abc.DEF-_.ghi"),
        ("bearer abc.def.ghi", "abc.def.ghi"),
        ("BEARER  sha256~xYz-09_", "sha256~xYz-09_"),
        (" Bearer abc+/== ", "abc+/=="),
    ],
)
def test_bearer_tokens_are_extracted(header, token):
    assert bearer_token(header) == token


@pytest.mark.parametrize(
    "token",
    ["not-a-jwt", "a.b.c", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "eyJ4IjoxfQ.bm90IGpzb24.c2ln"],
)
def test_tokens_that_are_not_jwts_are_rejected_without_echo(make_authenticator, token, caplog):
    caplog.set_level(logging.DEBUG, logger="workqueue.auth")
    authenticator = make_authenticator([])
    with pytest.raises(AuthenticationError) as caught:
        authenticator.authenticate(f"Bearer {token}")
    assert caught.value.reason in {"malformed token", "token has no issuer"}
    assert token not in str(caught.value) + repr(caught.value) + caplog.text


def test_without_a_header_the_caller_is_anonymous(make_authenticator):
    # The HTTP layer passes only `Authorization`; a request carrying
    # `X-Forwarded-User` or a proxy cookie but no Bearer token ends here.
    with pytest.raises(AuthenticationError, match="missing bearer token"):
        make_authenticator([]).authenticate(None)


def test_the_local_user_stands_in_only_when_no_header_is_sent(
    make_authenticator, issuer, rsa_signing_key, caplog
):
    caplog.set_level(logging.INFO, logger="workqueue.auth")
    authenticator = make_authenticator([issuer_rule(issuer.url)], local_user="dev@laptop")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("WORKQUEUE_SERVICE_LOCAL_AUTH_USER" in message for message in warnings)
    principal = authenticator.authenticate(None)
    assert (principal.identity, principal.kind, principal.issuer) == ("dev@laptop", "local", None)
    # A header is still checked for real, and a bad one is not excused.
    with pytest.raises(AuthenticationError):
        authenticator.authenticate("Bearer forged.token.value")
    token = sign(claims_for(issuer.url), rsa_signing_key)
    assert authenticator.authenticate(f"Bearer {token}").kind == "jwt"


def test_an_empty_local_user_is_no_local_user(make_authenticator):
    with pytest.raises(AuthenticationError):
        make_authenticator([], local_user="").authenticate(None)


def test_principals_and_errors_print_no_token(make_authenticator, issuer, rsa_signing_key):
    authenticator = make_authenticator([issuer_rule(issuer.url)])
    token = sign(claims_for(issuer.url), rsa_signing_key)
    principal = authenticator.authenticate(f"Bearer {token}")
    assert token not in repr(principal)
    assert token.rsplit(".", 1)[1] not in repr(principal)
    hash(principal)  # usable as a dict key or cache key by the HTTP layer
