"""`issuer: k8s` — skipped outside a cluster, discovered in-cluster (DDR-11, DDR-26).

The in-cluster case is simulated honestly: a local HTTPS server with a
certificate from a throwaway CA stands in for the API server, and the
cluster environment points at it (`api_host`), at that CA (`ca_path`) and
at a service-account token file. Discovery, the host rewrite of
`jwks_uri`, the bearer credential on both requests and certificate
verification all run as in production; only the host name differs
(127.0.0.1:port instead of kubernetes.default.svc).
"""

from __future__ import annotations

import logging

import pytest
from auth_support import (
    USERS_PATH,
    LocalIssuer,
    LocalOpenShift,
    claims_for,
    issuer_rule,
    make_tls_files,
    sign,
)

from workqueue.auth import AuthenticationError, ClusterEnvironment, IssuerUnavailableError

CLUSTER_ISSUER = "https://oidc.op1.example.test/2a3b4c5d"
SERVICE_ACCOUNT_TOKEN = "service-account-token-of-workqueue"
BOT = "system:serviceaccount:hummingbird--internal:rpms-ci"


@pytest.fixture
def tls_files(tmp_path):
    return make_tls_files(tmp_path)


@pytest.fixture
def api_server(tls_files, rsa_signing_key):
    server = LocalIssuer(
        tls=tls_files.server_context(),
        issuer_override=CLUSTER_ISSUER,
        # What a managed cluster publishes: an address pods cannot reach.
        jwks_uri_override="https://10.255.255.1:6443/openid/v1/jwks",
        keys_path="/openid/v1/jwks",
        required_bearer=SERVICE_ACCOUNT_TOKEN,
    )
    server.publish(rsa_signing_key)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def cluster(tmp_path, tls_files, api_server):
    token_path = tmp_path / "token"
    token_path.write_text(SERVICE_ACCOUNT_TOKEN + "\n", encoding="utf-8")
    return ClusterEnvironment(
        api_host=f"127.0.0.1:{api_server.port}", token_path=token_path, ca_path=tls_files.ca_path
    )


def k8s_claims(**overrides):
    # Projected service-account tokens carry `aud` as a list.
    return claims_for(CLUSTER_ISSUER, **{"aud": ["workqueue-service"], "sub": BOT, **overrides})


def test_a_cluster_token_is_verified_with_discovered_issuer_and_rewritten_key_url(
    make_authenticator, cluster, api_server, rsa_signing_key
):
    authenticator = make_authenticator([issuer_rule("k8s")], cluster=cluster)
    principal = authenticator.authenticate(f"Bearer {sign(k8s_claims(), rsa_signing_key)}")
    assert principal.identity == BOT
    assert principal.issuer == CLUSTER_ISSUER
    assert principal.configured_issuers == {"k8s"}
    # Key set fetched from the API server although discovery named 10.255.255.1.
    assert api_server.jwks_hits == 1
    assert api_server.discovery_hits == 1
    # The pod's service-account token went along on both requests.
    assert api_server.authorizations == [f"Bearer {SERVICE_ACCOUNT_TOKEN}"] * 2


def test_the_service_account_token_is_reread_for_each_fetch(
    make_authenticator, cluster, api_server, rsa_signing_key, second_rsa_key, clock
):
    authenticator = make_authenticator([issuer_rule("k8s")], cluster=cluster)
    authenticator.authenticate(f"Bearer {sign(k8s_claims(), rsa_signing_key)}")
    # The kubelet rotated the projected token; the issuer rotated its key.
    cluster.token_path.write_text("rotated-token", encoding="utf-8")
    api_server.required_bearer = "rotated-token"
    api_server.publish(rsa_signing_key, second_rsa_key)
    clock.advance(31)
    authenticator.authenticate(f"Bearer {sign(k8s_claims(), second_rsa_key)}")
    assert api_server.authorizations[-1] == "Bearer rotated-token"


def test_the_cluster_ca_is_enforced(make_authenticator, tmp_path, cluster, rsa_signing_key):
    other_ca = make_tls_files(tmp_path / "other").ca_path
    impostor = ClusterEnvironment(
        api_host=cluster.api_host, token_path=cluster.token_path, ca_path=other_ca
    )
    authenticator = make_authenticator([issuer_rule("k8s")], cluster=impostor)
    with pytest.raises(IssuerUnavailableError):
        authenticator.authenticate(f"Bearer {sign(k8s_claims(), rsa_signing_key)}")


def test_tokens_of_other_issuers_are_not_taken_for_the_cluster(
    make_authenticator, cluster, rsa_signing_key
):
    authenticator = make_authenticator([issuer_rule("k8s")], cluster=cluster)
    token = sign(
        claims_for("https://kubernetes.default.svc", aud=["workqueue-service"]), rsa_signing_key
    )
    with pytest.raises(AuthenticationError, match="token issuer not trusted"):
        authenticator.authenticate(f"Bearer {token}")


def test_the_cluster_issuer_also_named_by_url_matches_both_kinds_of_rule(
    make_authenticator, cluster, api_server, rsa_signing_key
):
    # Keys still come through the API server: the public URL is never
    # contacted (it does not even resolve here).
    authenticator = make_authenticator(
        [issuer_rule("k8s"), issuer_rule(CLUSTER_ISSUER, claims={"aud": "other-audience"})],
        cluster=cluster,
    )
    token = sign(k8s_claims(aud=["other-audience"]), rsa_signing_key)
    principal = authenticator.authenticate(f"Bearer {token}")
    assert principal.configured_issuers == {"k8s", CLUSTER_ISSUER}
    assert api_server.jwks_hits == 1


def test_outside_a_cluster_k8s_rules_are_skipped_with_one_info_log(
    make_authenticator, outside_cluster, issuer, rsa_signing_key, caplog
):
    caplog.set_level(logging.INFO, logger="workqueue.auth")
    authenticator = make_authenticator(
        [issuer_rule("k8s"), issuer_rule("k8s", permissions=["submit"]), issuer_rule(issuer.url)],
        cluster=outside_cluster,
    )
    skipped = [record for record in caplog.records if "skipped" in record.getMessage()]
    assert [record.levelno for record in skipped] == [logging.INFO]
    assert str(outside_cluster.ca_path) in skipped[0].getMessage()
    with pytest.raises(AuthenticationError, match="token issuer not trusted"):
        authenticator.authenticate(f"Bearer {sign(k8s_claims(), rsa_signing_key)}")
    # Rules of other issuers keep working.
    token = sign(claims_for(issuer.url), rsa_signing_key)
    assert authenticator.authenticate(f"Bearer {token}").configured_issuers == {issuer.url}


def test_in_cluster_openshift_tokens_go_to_the_api_server_with_the_cluster_ca(
    make_authenticator, tmp_path, tls_files
):
    api = LocalOpenShift(tls=tls_files.server_context())
    api.users["sha256~carol-token-0123456789"] = ("carol", ["devs"])
    api.start()
    try:
        cluster = ClusterEnvironment(
            api_host=f"127.0.0.1:{api.port}",
            token_path=tmp_path / "unused-token",
            ca_path=tls_files.ca_path,
        )
        authenticator = make_authenticator([], cluster=cluster)
        principal = authenticator.authenticate("Bearer sha256~carol-token-0123456789")
        assert (principal.identity, principal.kind) == ("carol", "openshift")
        assert api.hits[USERS_PATH] == 1
    finally:
        api.stop()


def test_offline_a_url_issuer_verifies_beside_a_cluster_issuer_never_discovered(
    make_authenticator, cluster, api_server, issuer, rsa_signing_key
):
    authenticator = make_authenticator(
        [issuer_rule("k8s"), issuer_rule(issuer.issuer)], cluster=cluster
    )
    token = f"Bearer {sign(claims_for(issuer.issuer), rsa_signing_key)}"
    api_server.required_bearer = "another-token"  # cluster discovery fails for now
    authenticator.authenticate(token)  # verified by the URL issuer all the same
    api_server.required_bearer = SERVICE_ACCOUNT_TOKEN
    asked = api_server.discovery_hits

    assert authenticator.authenticate(token, offline=True).issuer == issuer.issuer
    assert api_server.discovery_hits == asked  # the cluster was not asked
