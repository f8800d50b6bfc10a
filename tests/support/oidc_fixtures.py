"""Fixtures for tests that call the API with real tokens: one signing key, one local issuer.

Registered for the whole suite by `tests/conftest.py` (`pytest_plugins`); a
directory's own conftest may still define its own `key` or `issuer`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from auth_support import LocalIssuer, SigningKey, rsa_key


@pytest.fixture(scope="session")
def key() -> SigningKey:
    """An RSA signing key (generating one is the slow part, so it is shared)."""
    return rsa_key("test-key")


@pytest.fixture
def issuer(key: SigningKey) -> Iterator[LocalIssuer]:
    """A real OIDC issuer over HTTP publishing `key`."""
    server = LocalIssuer()
    server.publish(key)
    server.start()
    yield server
    server.stop()
