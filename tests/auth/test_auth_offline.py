"""`authenticate(..., offline=True)`: what the HTTP layer asks for a client address over
its budget of failed authentications. Known tokens still prove their caller; nothing that
would need the issuer calls it. Real local issuer, real HTTP."""

from __future__ import annotations

import pytest
from auth_support import claims_for, issuer_rule, rsa_key, sign

from workqueue.auth import AuthenticationError


@pytest.fixture
def authenticator(make_authenticator, issuer):
    return make_authenticator([issuer_rule(issuer.issuer)])


def test_a_token_signed_with_a_key_already_held_is_verified_offline(
    authenticator, issuer, rsa_signing_key
):
    token = f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}"
    authenticator.authenticate(token)
    hits = (issuer.discovery_hits, issuer.jwks_hits)

    principal = authenticator.authenticate(token, offline=True)

    assert principal.issuer == issuer.issuer
    assert (issuer.discovery_hits, issuer.jwks_hits) == hits


def test_an_issuer_never_asked_is_not_asked_offline(authenticator, issuer, rsa_signing_key):
    token = f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}"
    with pytest.raises(AuthenticationError, match="too many failed authentications"):
        authenticator.authenticate(token, offline=True)
    assert (issuer.discovery_hits, issuer.jwks_hits) == (0, 0)


def test_an_unknown_key_id_is_refused_offline_without_a_refresh(
    authenticator, issuer, rsa_signing_key, clock
):
    authenticator.authenticate(f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}")
    clock.advance(3600)  # the refresh limit would allow a fetch, and the keys are stale
    unknown = sign(claims_for(issuer.issuer), rsa_key("made-up"))
    with pytest.raises(AuthenticationError):
        authenticator.authenticate(f"Bearer {unknown}", offline=True)
    assert issuer.jwks_hits == 1


def test_a_held_key_that_aged_out_is_refreshed_offline_within_the_limit(
    authenticator, issuer, rsa_signing_key, clock
):
    # An address kept over its budget for longer than the keys' age must not lock out
    # the callers behind it whose tokens are signed by a key the service holds.
    authenticator.authenticate(f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}")
    clock.advance(3600)
    for _ in range(3):
        token = sign(claims_for(issuer.issuer), rsa_signing_key)
        assert authenticator.authenticate(f"Bearer {token}", offline=True).kind == "jwt"
    forged = sign(claims_for(issuer.issuer), rsa_key("forger"), kid=rsa_signing_key.kid)
    with pytest.raises(AuthenticationError, match="invalid token signature"):
        authenticator.authenticate(f"Bearer {forged}", offline=True)
    assert issuer.jwks_hits == 2


def test_a_bad_signature_is_refused_offline(authenticator, issuer, rsa_signing_key):
    authenticator.authenticate(f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}")
    forged = sign(claims_for(issuer.issuer), rsa_key("forger"), kid=rsa_signing_key.kid)
    with pytest.raises(AuthenticationError, match="invalid token signature"):
        authenticator.authenticate(f"Bearer {forged}", offline=True)
    assert issuer.jwks_hits == 1
