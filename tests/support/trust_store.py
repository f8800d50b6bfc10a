"""One default TLS trust store per test process, instead of one per HTTP client.

httpx loads certifi's CA bundle into a new `SSLContext` for every client it makes,
about 25 ms of CPU each, even for a client that only ever speaks plain HTTP to a
local test server; the suite makes thousands of them (every `httpx.get` is one).
Clients made with the defaults (`verify=True`, no client certificate) get one
context per trust-store setting, made by httpx's own function. Any other `verify`
or `cert` goes to httpx unchanged, so tests of TLS settings see what users get.
Sharing is safe here: httpx never changes a context after making it, and httpcore
sets the same ALPN protocols on it for every HTTP/1.1 connection.
"""

from __future__ import annotations

import functools
import os
import ssl
from typing import Any

import httpx._transports.default as transports

_create_ssl_context = transports.create_ssl_context


@functools.cache
def _default_context(
    trust_env: bool, cert_file: str | None, cert_dir: str | None
) -> ssl.SSLContext:
    del cert_file, cert_dir  # part of the cache key: httpx reads them from the environment
    return _create_ssl_context(verify=True, cert=None, trust_env=trust_env)


def _create_or_share(
    verify: Any = True, cert: Any = None, trust_env: bool = True
) -> ssl.SSLContext:
    if verify is True and cert is None:
        return _default_context(
            trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        )
    return _create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)


def share_default_trust_store() -> None:
    transports.create_ssl_context = _create_or_share  # type: ignore[assignment]
