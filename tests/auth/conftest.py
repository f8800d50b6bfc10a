"""Fixtures for the auth tests: local issuers and OpenShift API, authenticators built from rules."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from auth_support import (
    FakeClock,
    LocalIssuer,
    LocalOpenShift,
    SigningKey,
    ec_key,
    ed25519_key,
    rsa_key,
)

from workqueue.auth import Authenticator, AuthorizationConfig, ClusterEnvironment

# Key generation is the slow part (RSA); the keys are reused by every test.


@pytest.fixture(scope="session")
def rsa_signing_key() -> SigningKey:
    return rsa_key("rsa-1")


@pytest.fixture(scope="session")
def second_rsa_key() -> SigningKey:
    return rsa_key("rsa-2")


@pytest.fixture(scope="session")
def ec_signing_key() -> SigningKey:
    return ec_key("ec-1")


@pytest.fixture(scope="session")
def ed_signing_key() -> SigningKey:
    return ed25519_key("ed-1")


@pytest.fixture(scope="session")
def attacker_key() -> SigningKey:
    """Another party's RSA key, published by no trusted issuer."""
    return rsa_key("attacker-1")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def issuer(rsa_signing_key, ec_signing_key, ed_signing_key) -> Iterator[LocalIssuer]:
    server = LocalIssuer()
    server.publish(rsa_signing_key, ec_signing_key, ed_signing_key)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def other_issuer(attacker_key) -> Iterator[LocalIssuer]:
    """A second trusted issuer with keys of its own."""
    server = LocalIssuer()
    server.publish(attacker_key)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def openshift() -> Iterator[LocalOpenShift]:
    server = LocalOpenShift()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def outside_cluster(tmp_path: Path) -> ClusterEnvironment:
    """A cluster environment whose files do not exist: a developer laptop."""
    return ClusterEnvironment(
        api_host="127.0.0.1:9",
        token_path=tmp_path / "no-cluster" / "token",
        ca_path=tmp_path / "no-cluster" / "ca.crt",
    )


@pytest.fixture
def make_authenticator(
    clock: FakeClock, outside_cluster: ClusterEnvironment
) -> Iterator[Callable[..., Authenticator]]:
    """Builds authenticators from rule dicts (fake clock, no cluster); closes them after."""
    built: list[Authenticator] = []

    def build(rules: list[dict[str, Any]], **options: Any) -> Authenticator:
        options.setdefault("clock", clock)
        options.setdefault("cluster", outside_cluster)
        options.setdefault("http_timeout_seconds", 2.0)
        config = AuthorizationConfig.model_validate({"rules": rules})
        authenticator = Authenticator(config, **options)
        built.append(authenticator)
        return authenticator

    yield build
    for authenticator in built:
        authenticator.close()
