"""Opaque OpenShift tokens against a real local `users/~` endpoint: identity, groups, caching."""

from __future__ import annotations

import hashlib
import logging

import pytest
from auth_support import LocalOpenShift

from workqueue.auth import AuthenticationError, IssuerUnavailableError

ALICE_TOKEN = "sha256~Alice0123456789abcdefghijklmnopqrstuvwxyzABCD"
EXPIRED_TOKEN = "sha256~Expired9876543210zyxwvutsrqponmlkjihgfedcbaZY"


@pytest.fixture
def authenticator(make_authenticator, openshift):
    openshift.users[ALICE_TOKEN] = ("alice", ["konflux-hummingbird-admin-access", "devs"])
    return make_authenticator(
        [{"groups": ["devs"], "permissions": ["read"]}], openshift_api_url=openshift.url
    )


def assert_not_leaked(token, error, caplog):
    for text in (str(error), repr(error), caplog.text):
        assert token not in text
        assert token.removeprefix("sha256~") not in text


def test_a_valid_token_yields_the_user_and_groups(authenticator, openshift):
    principal = authenticator.authenticate(f"Bearer {ALICE_TOKEN}")
    assert principal.kind == "openshift"
    assert principal.identity == "alice"
    assert principal.issuer is None
    assert principal.claims == {}
    assert principal.groups == {
        "konflux-hummingbird-admin-access",
        "devs",
        "system:authenticated",
        "system:authenticated:oauth",
    }
    # The user's own token authenticates the call (self-authentication, DDR-24).
    assert openshift.authorizations == [f"Bearer {ALICE_TOKEN}"]


def test_success_is_cached_for_the_ttl(authenticator, openshift, clock):
    for _ in range(3):
        authenticator.authenticate(f"Bearer {ALICE_TOKEN}")
    assert openshift.user_hits == 1
    clock.advance(299)
    authenticator.authenticate(f"Bearer {ALICE_TOKEN}")
    assert openshift.user_hits == 1
    clock.advance(2)
    authenticator.authenticate(f"Bearer {ALICE_TOKEN}")
    assert openshift.user_hits == 2


def test_a_rejected_token_is_refused_and_its_refusal_kept_for_10_seconds(
    authenticator, openshift, caplog, clock
):
    caplog.set_level(logging.DEBUG, logger="workqueue.auth")
    for _ in range(3):
        with pytest.raises(AuthenticationError) as caught:
            authenticator.authenticate(f"Bearer {EXPIRED_TOKEN}")
        assert caught.value.reason == "token rejected by OpenShift"
        assert not isinstance(caught.value, IssuerUnavailableError)
        assert_not_leaked(EXPIRED_TOKEN, caught.value, caplog)
        clock.advance(3)
    assert openshift.user_hits == 1  # a bogus token repeated costs one call per 10 s
    clock.advance(1.1)  # 10.1 s after the refusal
    openshift.users[EXPIRED_TOKEN] = ("bob", [])
    assert authenticator.authenticate(f"Bearer {EXPIRED_TOKEN}").identity == "bob"
    assert openshift.user_hits == 2


def test_a_refreshed_session_is_asked_about_at_once(authenticator, openshift):
    with pytest.raises(AuthenticationError):
        authenticator.authenticate(f"Bearer {EXPIRED_TOKEN}")
    # The OAuth proxy refreshes a session with a new token: no refusal is kept for it.
    openshift.users[ALICE_TOKEN] = ("alice", [])
    assert authenticator.authenticate(f"Bearer {ALICE_TOKEN}").identity == "alice"
    assert openshift.user_hits == 2


def test_offline_answers_from_the_caches_only(authenticator, openshift):
    with pytest.raises(AuthenticationError, match="too many failed authentications"):
        authenticator.authenticate(f"Bearer {ALICE_TOKEN}", offline=True)
    assert openshift.user_hits == 0
    authenticator.authenticate(f"Bearer {ALICE_TOKEN}")
    assert authenticator.authenticate(f"Bearer {ALICE_TOKEN}", offline=True).identity == "alice"
    with pytest.raises(AuthenticationError):
        authenticator.authenticate(f"Bearer {EXPIRED_TOKEN}")
    with pytest.raises(AuthenticationError, match="rejected by OpenShift"):
        authenticator.authenticate(f"Bearer {EXPIRED_TOKEN}", offline=True)
    assert openshift.user_hits == 2


def test_an_api_failure_is_unavailable_and_not_cached(authenticator, openshift, caplog):
    openshift.status_override = 500
    with pytest.raises(IssuerUnavailableError) as caught:
        authenticator.authenticate(f"Bearer {ALICE_TOKEN}")
    assert len(authenticator._openshift._refusals) == 0
    assert_not_leaked(ALICE_TOKEN, caught.value, caplog)
    openshift.status_override = None
    assert authenticator.authenticate(f"Bearer {ALICE_TOKEN}").identity == "alice"
    assert openshift.user_hits == 2


def test_an_unreachable_api_is_unavailable(make_authenticator, caplog):
    down = LocalOpenShift()
    down.start()
    url = down.url
    down.stop()
    authenticator = make_authenticator([], openshift_api_url=url)
    with pytest.raises(IssuerUnavailableError) as caught:
        authenticator.authenticate(f"Bearer {ALICE_TOKEN}")
    assert_not_leaked(ALICE_TOKEN, caught.value, caplog)


def test_the_caches_hold_a_hash_of_the_token_not_the_token(authenticator):
    authenticator.authenticate(f"Bearer {ALICE_TOKEN}")
    with pytest.raises(AuthenticationError):
        authenticator.authenticate(f"Bearer {EXPIRED_TOKEN}")
    for cache, token in (
        (authenticator._openshift._users._entries, ALICE_TOKEN),
        (authenticator._openshift._refusals._entries, EXPIRED_TOKEN),
    ):
        assert list(cache) == [hashlib.sha256(token.encode()).hexdigest()]
        assert token not in repr(cache)
        assert token.removeprefix("sha256~") not in repr(cache)


def test_the_cache_is_bounded(make_authenticator, openshift):
    tokens = [f"sha256~user{number:04d}abcdefghijklmnop" for number in range(5)]
    for number, token in enumerate(tokens):
        openshift.users[token] = (f"user{number}", [])
    authenticator = make_authenticator([], openshift_api_url=openshift.url)
    authenticator._openshift._users._max_entries = 3
    for token in tokens:
        authenticator.authenticate(f"Bearer {token}")
    assert len(authenticator._openshift._users) == 3
    authenticator.authenticate(f"Bearer {tokens[-1]}")
    assert openshift.user_hits == 5


def test_unique_bogus_tokens_do_not_grow_the_refusals_past_their_bound(
    make_authenticator, openshift
):
    authenticator = make_authenticator([], openshift_api_url=openshift.url)
    authenticator._openshift._refusals._max_entries = 3
    for number in range(20):
        with pytest.raises(AuthenticationError):
            authenticator.authenticate(f"Bearer sha256~bogus{number:04d}")
    assert len(authenticator._openshift._refusals) == 3
    assert openshift.user_hits == 20


def test_a_response_that_is_not_a_user_is_refused(make_authenticator, openshift):
    openshift.users[ALICE_TOKEN] = ("", [])
    authenticator = make_authenticator([], openshift_api_url=openshift.url)
    with pytest.raises(IssuerUnavailableError):
        authenticator.authenticate(f"Bearer {ALICE_TOKEN}")


def test_outside_a_cluster_without_an_api_url_openshift_tokens_are_refused(
    make_authenticator, openshift
):
    authenticator = make_authenticator([{"groups": ["devs"], "permissions": ["read"]}])
    with pytest.raises(AuthenticationError, match="OpenShift tokens cannot be checked here"):
        authenticator.authenticate(f"Bearer {ALICE_TOKEN}")
    assert openshift.user_hits == 0
