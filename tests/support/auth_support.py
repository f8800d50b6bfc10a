"""Real local stand-ins for what authentication talks to.

- `LocalIssuer`: an OIDC issuer over real HTTP (optionally real TLS) serving
  a discovery document and a JSON Web Key Set built from real RSA, EC and
  Ed25519 keys; it signs tokens with PyJWT exactly as GitLab or Kubernetes
  would. It can require a bearer credential on both documents, as the
  OpenShift API server does for the cluster issuer.
- `LocalOpenShift`: the `users/~` endpoint, answering per token like the
  real API server (200 `User`, 401 `Status`).
- `make_tls_files`: a throwaway CA and a server certificate for 127.0.0.1,
  so the in-cluster path is tested with real certificate verification.

Every server counts requests per path, which is how tests observe caching
and refreshes.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import ipaddress
import json
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

AUDIENCE = "workqueue-service"


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private_key: Any
    algorithm: str

    def public_jwk(self, **extra: Any) -> dict[str, Any]:
        public = self.private_key.public_key()
        if isinstance(public, rsa.RSAPublicKey):
            jwk = RSAAlgorithm.to_jwk(public, as_dict=True)
        elif isinstance(public, ec.EllipticCurvePublicKey):
            jwk = ECAlgorithm.to_jwk(public, as_dict=True)
        else:
            jwk = OKPAlgorithm.to_jwk(public, as_dict=True)
        return {**jwk, "kid": self.kid, "use": "sig", **extra}

    def public_pem(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def rsa_key(kid: str, algorithm: str = "RS256") -> SigningKey:
    return SigningKey(
        kid, rsa.generate_private_key(public_exponent=65537, key_size=2048), algorithm
    )


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, ec.generate_private_key(ec.SECP256R1()), "ES256")


def ed25519_key(kid: str) -> SigningKey:
    return SigningKey(kid, ed25519.Ed25519PrivateKey.generate(), "EdDSA")


def claims_for(issuer: str, **overrides: Any) -> dict[str, Any]:
    """GitLab-CI-like claims, valid for five minutes; `name=None` drops a claim."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": issuer,
        "aud": AUDIENCE,
        "sub": "project_path:redhat/hummingbird/rpms:ref_type:branch:ref:main",
        "iat": now,
        "nbf": now - 5,
        "exp": now + 300,
        "project_path": "redhat/hummingbird/rpms",
        "project_id": "4242",
        "ref_protected": "true",
    }
    claims.update(overrides)
    return {name: value for name, value in claims.items() if value is not None}


def issuer_rule(issuer_url: str, **extra: Any) -> dict[str, Any]:
    """A config rule trusting `issuer_url` for the usual audience, all permissions."""
    rule: dict[str, Any] = {
        "issuer": issuer_url,
        "claims": {"aud": AUDIENCE},
        "permissions": ["read", "submit", "retry"],
        "projects": ["**"],
    }
    rule.update(extra)
    return rule


def sign(claims: dict[str, Any], key: SigningKey, **header: Any) -> str:
    headers = {"kid": key.kid, **header}
    algorithm = headers.pop("alg", key.algorithm)
    return jwt.encode(claims, key.private_key, algorithm=algorithm, headers=headers)


def _segment(data: dict[str, Any] | bytes) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsigned_token(claims: dict[str, Any], kid: str) -> str:
    """`alg: none`, which PyJWT refuses to produce with a key, built by hand."""
    return f"{_segment({'alg': 'none', 'typ': 'JWT', 'kid': kid})}.{_segment(claims)}."


def hs256_token(claims: dict[str, Any], secret: bytes, kid: str) -> str:
    """HS256 with `secret` as the HMAC key. PyJWT refuses PEM secrets, so by hand."""
    signing_input = f"{_segment({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{_segment(claims)}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_segment(signature)}"


def replace_payload(token: str, claims: dict[str, Any]) -> str:
    header, _, signature = token.split(".")
    return f"{header}.{_segment(claims)}.{signature}"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True


@dataclass
class _Server:
    """A threaded HTTP(S) server on 127.0.0.1 answering GETs via `respond`."""

    tls: ssl.SSLContext | None = None
    hits: Counter[str] = field(default_factory=Counter)
    authorizations: list[str | None] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def respond(self, path: str, authorization: str | None) -> tuple[int, Any]:
        raise NotImplementedError

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                authorization = self.headers.get("Authorization")
                owner.hits[self.path] += 1
                owner.authorizations.append(authorization)
                status, body = owner.respond(self.path, authorization)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *_: object) -> None:
                # Silence per-request stderr lines; `hits` records every call.
                return

        server = _QuietServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


@dataclass
class LocalIssuer(_Server):
    """An OIDC issuer. `issuer` defaults to its own URL, as GitLab's does."""

    issuer_override: str | None = None
    jwks_uri_override: str | None = None
    keys_path: str = "/oauth/discovery/keys"
    required_bearer: str | None = None
    published: list[dict[str, Any]] = field(default_factory=list)
    jwks_delay_seconds: float = 0.0

    @property
    def issuer(self) -> str:
        return self.issuer_override or self.url

    def publish(self, *keys: SigningKey | dict[str, Any]) -> None:
        self.published = [key if isinstance(key, dict) else key.public_jwk() for key in keys]

    def respond(self, path: str, authorization: str | None) -> tuple[int, Any]:
        if self.required_bearer is not None and authorization != f"Bearer {self.required_bearer}":
            return 401, {"kind": "Status", "status": "Failure", "code": 401}
        if path == "/.well-known/openid-configuration":
            return 200, {
                "issuer": self.issuer,
                "jwks_uri": self.jwks_uri_override or self.url + self.keys_path,
                "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        if path == self.keys_path:
            time.sleep(self.jwks_delay_seconds)
            return 200, {"keys": list(self.published)}
        return 404, {"error": "not found"}

    @property
    def discovery_hits(self) -> int:
        return self.hits["/.well-known/openid-configuration"]

    @property
    def jwks_hits(self) -> int:
        return self.hits[self.keys_path]


USERS_PATH = "/apis/user.openshift.io/v1/users/~"


@dataclass
class LocalOpenShift(_Server):
    """`users/~`: 200 with the `User` of a known token, 401 `Status` otherwise."""

    users: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    status_override: int | None = None

    def respond(self, path: str, authorization: str | None) -> tuple[int, Any]:
        if path != USERS_PATH:
            return 404, {"kind": "Status", "code": 404}
        if self.status_override is not None:
            return self.status_override, {"kind": "Status", "code": self.status_override}
        token = (authorization or "").removeprefix("Bearer ")
        if token not in self.users:
            return 401, {"kind": "Status", "status": "Failure", "reason": "Unauthorized"}
        name, groups = self.users[token]
        return 200, {
            "kind": "User",
            "apiVersion": "user.openshift.io/v1",
            "metadata": {"name": name, "uid": "0b7c6a2e"},
            "identities": [f"sso:{name}"],
            "groups": sorted({*groups, "system:authenticated", "system:authenticated:oauth"}),
        }

    @property
    def user_hits(self) -> int:
        return self.hits[USERS_PATH]


@dataclass(frozen=True)
class TlsFiles:
    ca_path: Path
    certificate_path: Path
    key_path: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certificate_path, self.key_path)
        return context


def make_tls_files(directory: Path) -> TlsFiles:
    """A CA and a certificate it signed for 127.0.0.1, written as PEM files."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test cluster CA")])
    ca_certificate = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    files.ca_path.write_bytes(ca_certificate.public_bytes(serialization.Encoding.PEM))
    files.certificate_path.write_bytes(server_certificate.public_bytes(serialization.Encoding.PEM))
    files.key_path.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


class FakeClock:
    """A monotonic clock the test moves by hand (refresh limits and cache TTLs)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
