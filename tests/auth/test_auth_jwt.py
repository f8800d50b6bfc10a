"""JWT authentication against a real local OIDC issuer: accepted tokens and attacks."""

from __future__ import annotations

import base64
import logging
import threading
import time

import pytest
from auth_support import (
    AUDIENCE,
    LocalIssuer,
    claims_for,
    hs256_token,
    issuer_rule,
    replace_payload,
    sign,
    unsigned_token,
)

from workqueue.auth import AuthenticationError, IssuerUnavailableError


def reject(authenticator, token, caplog, *, header=None):
    """Authenticate, expect a refusal, and check the token leaked nowhere."""
    caplog.set_level(logging.DEBUG, logger="workqueue.auth")
    with pytest.raises(AuthenticationError) as caught:
        authenticator.authenticate(header or f"Bearer {token}")
    error = caught.value
    signature = token.rsplit(".", 1)[-1] or token
    for text in (str(error), repr(error), error.reason, caplog.text):
        assert token not in text
        assert len(signature) < 8 or signature not in text
    return error


@pytest.fixture
def authenticator(make_authenticator, issuer):
    return make_authenticator([issuer_rule(issuer.issuer)])


@pytest.mark.parametrize("key_fixture", ["rsa_signing_key", "ec_signing_key", "ed_signing_key"])
def test_a_token_signed_by_each_published_key_type_is_accepted(
    request, authenticator, issuer, key_fixture
):
    key = request.getfixturevalue(key_fixture)
    principal = authenticator.authenticate(f"Bearer {sign(claims_for(issuer.issuer), key)}")
    assert principal.kind == "jwt"
    assert principal.identity == "project_path:redhat/hummingbird/rpms:ref_type:branch:ref:main"
    assert principal.issuer == issuer.issuer
    assert principal.configured_issuers == {issuer.issuer}
    assert principal.claims["project_path"] == "redhat/hummingbird/rpms"
    assert principal.groups == frozenset()


def test_rsa_pss_is_accepted_for_an_rsa_key_without_declared_alg(
    authenticator, issuer, rsa_signing_key
):
    token = sign(claims_for(issuer.issuer), rsa_signing_key, alg="PS256")
    assert authenticator.authenticate(f"Bearer {token}").kind == "jwt"


def test_keys_are_fetched_lazily_once_and_then_cached(authenticator, issuer, rsa_signing_key):
    assert (issuer.discovery_hits, issuer.jwks_hits) == (0, 0)
    for _ in range(5):
        authenticator.authenticate(f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}")
    assert (issuer.discovery_hits, issuer.jwks_hits) == (1, 1)


def test_an_audience_list_is_accepted_when_one_element_is_ours(
    authenticator, issuer, rsa_signing_key
):
    claims = claims_for(issuer.issuer, aud=["https://kubernetes.default.svc", "workqueue-service"])
    assert authenticator.authenticate(f"Bearer {sign(claims, rsa_signing_key)}").kind == "jwt"


def test_expiry_within_the_leeway_is_tolerated(authenticator, issuer, rsa_signing_key):
    claims = claims_for(issuer.issuer, exp=int(time.time()) - 10)
    assert authenticator.authenticate(f"Bearer {sign(claims, rsa_signing_key)}").kind == "jwt"


# -- attacks and invalid tokens: every one is an AuthenticationError (401) ---------------


def test_alg_none_is_rejected(authenticator, issuer, rsa_signing_key, caplog):
    token = unsigned_token(claims_for(issuer.issuer), rsa_signing_key.kid)
    assert reject(authenticator, token, caplog).reason == "token signing algorithm not allowed"


def test_hs256_signed_with_the_rsa_public_key_is_rejected(
    authenticator, issuer, rsa_signing_key, caplog
):
    token = hs256_token(
        claims_for(issuer.issuer), rsa_signing_key.public_pem(), rsa_signing_key.kid
    )
    assert reject(authenticator, token, caplog).reason == "token signing algorithm not allowed"


def test_an_algorithm_of_another_family_than_the_key_is_rejected(
    authenticator, issuer, rsa_signing_key, ec_signing_key, caplog
):
    # An EC-signed token that names the RSA key: the key does not admit ES256.
    token = sign(claims_for(issuer.issuer), ec_signing_key, kid=rsa_signing_key.kid)
    reason = reject(authenticator, token, caplog).reason
    assert reason == "token signing algorithm does not match its key"


def test_a_key_declaring_its_alg_admits_only_that_alg(
    make_authenticator, issuer, rsa_signing_key, caplog
):
    issuer.publish(rsa_signing_key.public_jwk(alg="RS256"))
    authenticator = make_authenticator([issuer_rule(issuer.issuer)])
    accepted = sign(claims_for(issuer.issuer), rsa_signing_key)
    assert authenticator.authenticate(f"Bearer {accepted}").kind == "jwt"
    token = sign(claims_for(issuer.issuer), rsa_signing_key, alg="PS256")
    reason = reject(authenticator, token, caplog).reason
    assert reason == "token signing algorithm does not match its key"


def test_symmetric_keys_in_the_key_set_are_never_used(
    make_authenticator, issuer, rsa_signing_key, caplog
):
    secret = b"a-shared-secret-long-enough-for-hs256!!"
    encoded_secret = base64.urlsafe_b64encode(secret).rstrip(b"=").decode()
    oct_key = {"kty": "oct", "kid": "shared", "k": encoded_secret}
    issuer.publish(rsa_signing_key, oct_key)
    authenticator = make_authenticator([issuer_rule(issuer.issuer)])
    token = hs256_token(claims_for(issuer.issuer), secret, "shared")
    assert reject(authenticator, token, caplog).reason == "token signing algorithm not allowed"


def test_an_expired_token_is_rejected(authenticator, issuer, rsa_signing_key, caplog):
    token = sign(claims_for(issuer.issuer, exp=int(time.time()) - 120), rsa_signing_key)
    assert reject(authenticator, token, caplog).reason == "token expired"


@pytest.mark.parametrize("claim", ["nbf", "iat"])
def test_a_token_not_yet_valid_is_rejected(authenticator, issuer, rsa_signing_key, caplog, claim):
    token = sign(claims_for(issuer.issuer, **{claim: int(time.time()) + 300}), rsa_signing_key)
    assert reject(authenticator, token, caplog).reason == "token not yet valid"


@pytest.mark.parametrize("claim", ["aud", "exp", "sub"])
def test_a_token_without_a_required_claim_is_rejected(
    authenticator, issuer, rsa_signing_key, caplog, claim
):
    token = sign(claims_for(issuer.issuer, **{claim: None}), rsa_signing_key)
    assert reject(authenticator, token, caplog).reason == f"token lacks the {claim} claim"


@pytest.mark.parametrize("audience", ["another-service", ["another-service", "third"], [], 7])
def test_a_token_for_another_audience_is_rejected(
    authenticator, issuer, rsa_signing_key, caplog, audience
):
    # RFC 7519 §4.1.3: a token whose `aud` does not name this service (per
    # the rules of its issuer) was minted for someone else.
    token = sign(claims_for(issuer.issuer, aud=audience), rsa_signing_key)
    assert reject(authenticator, token, caplog).reason == "token audience not accepted"


def test_a_token_with_an_issuer_no_rule_names_is_rejected(
    authenticator, issuer, rsa_signing_key, caplog
):
    for untrusted in ["https://gitlab.example.com", issuer.issuer + "/", issuer.issuer.upper()]:
        token = sign(claims_for(untrusted), rsa_signing_key)
        assert reject(authenticator, token, caplog).reason == "token issuer not trusted"
    assert issuer.discovery_hits == 0


def test_a_token_without_issuer_is_rejected(authenticator, issuer, rsa_signing_key, caplog):
    token = sign(claims_for(issuer.issuer, iss=None), rsa_signing_key)
    assert reject(authenticator, token, caplog).reason == "token has no issuer"


def test_a_tampered_payload_is_rejected(authenticator, issuer, rsa_signing_key, caplog):
    token = sign(claims_for(issuer.issuer), rsa_signing_key)
    forged = replace_payload(token, claims_for(issuer.issuer, project_path="victim/project"))
    assert reject(authenticator, forged, caplog).reason == "invalid token signature"


def test_a_foreign_key_reusing_a_published_kid_is_rejected(
    authenticator, issuer, rsa_signing_key, attacker_key, caplog
):
    token = sign(claims_for(issuer.issuer), attacker_key, kid=rsa_signing_key.kid)
    assert reject(authenticator, token, caplog).reason == "invalid token signature"


def test_a_token_of_another_trusted_issuer_claiming_this_issuer_is_rejected(
    make_authenticator, issuer, other_issuer, attacker_key, clock, caplog
):
    # Both issuers are trusted; the token is signed by the other one's key
    # (published there) but claims to come from `issuer`.
    authenticator = make_authenticator(
        [issuer_rule(issuer.issuer), issuer_rule(other_issuer.issuer)]
    )
    genuine = sign(claims_for(other_issuer.issuer), attacker_key)
    assert authenticator.authenticate(f"Bearer {genuine}").issuer == other_issuer.issuer
    clock.advance(60)
    token = sign(claims_for(issuer.issuer), attacker_key)
    assert reject(authenticator, token, caplog).reason == "token signing key unknown"


def test_an_unknown_kid_is_rejected_after_exactly_one_refresh(
    authenticator, issuer, rsa_signing_key, attacker_key, clock, caplog
):
    authenticator.authenticate(f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}")
    clock.advance(31)
    token = sign(claims_for(issuer.issuer), attacker_key)
    assert reject(authenticator, token, caplog).reason == "token signing key unknown"
    assert issuer.jwks_hits == 2
    # Within the refresh interval more unknown kids cost the issuer nothing.
    for _ in range(5):
        reject(authenticator, token, caplog)
    assert issuer.jwks_hits == 2
    assert issuer.discovery_hits == 1


def test_a_rotated_key_is_picked_up_by_one_refresh(
    authenticator, issuer, rsa_signing_key, second_rsa_key, clock
):
    authenticator.authenticate(f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}")
    issuer.publish(rsa_signing_key, second_rsa_key)
    clock.advance(31)
    token = sign(claims_for(issuer.issuer), second_rsa_key)
    assert authenticator.authenticate(f"Bearer {token}").kind == "jwt"
    assert issuer.jwks_hits == 2


def test_concurrent_requests_with_a_new_kid_share_one_refresh(
    authenticator, issuer, rsa_signing_key, second_rsa_key, clock
):
    authenticator.authenticate(f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}")
    issuer.publish(rsa_signing_key, second_rsa_key)
    issuer.jwks_delay_seconds = 0.2
    clock.advance(31)
    token = f"Bearer {sign(claims_for(issuer.issuer), second_rsa_key)}"
    results: list[object] = []
    threads = [
        threading.Thread(target=lambda: results.append(authenticator.authenticate(token)))
        for _ in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 16
    assert issuer.jwks_hits == 2


def test_a_withdrawn_key_stops_working_once_the_key_set_ages_out(
    authenticator, issuer, rsa_signing_key, ec_signing_key, clock, caplog
):
    token = sign(claims_for(issuer.issuer), rsa_signing_key)
    authenticator.authenticate(f"Bearer {token}")
    issuer.publish(ec_signing_key)
    clock.advance(3601)
    assert reject(authenticator, token, caplog).reason == "token signing key unknown"


def test_aged_keys_keep_working_while_the_issuer_is_down(
    authenticator, issuer, rsa_signing_key, clock
):
    token = f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}"
    authenticator.authenticate(token)
    issuer.stop()
    clock.advance(3601)
    assert authenticator.authenticate(token).kind == "jwt"


def test_discovery_naming_another_issuer_is_refused(
    make_authenticator, issuer, rsa_signing_key, caplog
):
    # An impostor discovery document must not get its keys trusted.
    issuer.issuer_override = "https://gitlab.com"
    authenticator = make_authenticator([issuer_rule(issuer.url)])
    token = sign(claims_for(issuer.url), rsa_signing_key)
    error = reject(authenticator, token, caplog)
    assert isinstance(error, IssuerUnavailableError)
    assert "discovery names issuer 'https://gitlab.com'" in caplog.text
    assert issuer.jwks_hits == 0


def test_an_unreachable_issuer_fails_closed_and_is_not_hammered(
    make_authenticator, rsa_signing_key, caplog
):
    down = LocalIssuer()
    down.start()
    url = down.issuer
    down.stop()
    authenticator = make_authenticator([issuer_rule(url)])
    token = sign(claims_for(url), rsa_signing_key)
    assert isinstance(reject(authenticator, token, caplog), IssuerUnavailableError)
    assert isinstance(reject(authenticator, token, caplog), IssuerUnavailableError)
    assert caplog.text.count("cannot fetch") == 1


def test_an_issuer_with_a_trailing_slash_finds_its_discovery_document(
    make_authenticator, rsa_signing_key
):
    server = LocalIssuer()
    server.start()
    try:
        server.issuer_override = server.url + "/"
        server.publish(rsa_signing_key)
        authenticator = make_authenticator([issuer_rule(server.url + "/")])
        token = sign(claims_for(server.url + "/"), rsa_signing_key)
        assert authenticator.authenticate(f"Bearer {token}").issuer == server.url + "/"
    finally:
        server.stop()


def test_http_issuers_are_flagged_with_a_warning(make_authenticator, issuer, caplog):
    caplog.set_level(logging.INFO, logger="workqueue.auth")
    make_authenticator([issuer_rule(issuer.issuer)])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [issuer.issuer in r.getMessage() for r in warnings] == [True]


def test_audiences_are_collected_per_issuer(make_authenticator, issuer, rsa_signing_key, caplog):
    # An audience bound by a rule of another issuer does not count for this one.
    authenticator = make_authenticator(
        [
            issuer_rule(issuer.issuer),
            issuer_rule("https://gitlab.example.com", claims={"aud": ["other-service"]}),
        ]
    )
    token = sign(claims_for(issuer.issuer, aud="other-service"), rsa_signing_key)
    assert reject(authenticator, token, caplog).reason == "token audience not accepted"
    ours = sign(claims_for(issuer.issuer, aud=AUDIENCE), rsa_signing_key)
    assert authenticator.authenticate(f"Bearer {ours}").kind == "jwt"
    # Audiences are compared exactly: another spelling names another service.
    other_case = sign(claims_for(issuer.issuer, aud=AUDIENCE.upper()), rsa_signing_key)
    assert reject(authenticator, other_case, caplog).reason == "token audience not accepted"
