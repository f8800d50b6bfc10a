"""The cluster the service runs in: its API server, CA bundle and service-account token.

`issuer: k8s` in a rule means "the service-account issuer of this cluster".
Its URL differs per cluster (on managed clusters it is an external OIDC
URL), so it is read from in-cluster discovery (DDR-11), and the key set is
fetched from the API server itself because the published `jwks_uri` may name
an address pods cannot reach. OpenShift refuses anonymous requests to both
documents, so the pod's own service-account token goes along.

Outside a cluster (no CA bundle) such rules are skipped (DDR-26), which lets
a production config file run on a laptop.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workqueue.auth.oidc import DISCOVERY_PATH, OIDCIssuer

SERVICE_ACCOUNT_DIRECTORY = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER_API_HOST = "kubernetes.default.svc"


@dataclass(frozen=True)
class ClusterEnvironment:
    """Where the in-cluster credentials live; the defaults are the real ones.

    Tests point `api_host` at a local TLS server and the paths at files
    they wrote; nothing else differs from production.
    """

    api_host: str = IN_CLUSTER_API_HOST
    token_path: Path = SERVICE_ACCOUNT_DIRECTORY / "token"
    ca_path: Path = SERVICE_ACCOUNT_DIRECTORY / "ca.crt"

    @property
    def api_url(self) -> str:
        return f"https://{self.api_host}"

    def is_present(self) -> bool:
        """Running in a cluster: the service-account CA bundle is mounted (DDR-26)."""
        return self.ca_path.is_file()

    def tls_context(self) -> ssl.SSLContext:
        """Trusts only the cluster CA: the API server's certificate is issued by it."""
        return ssl.create_default_context(cafile=str(self.ca_path))

    def service_account_token(self) -> str:
        # Read on every use: the kubelet rotates projected tokens in place.
        return self.token_path.read_text(encoding="utf-8").strip()

    def oidc_issuer(self, **options: Any) -> OIDCIssuer:
        """The cluster's service-account issuer, discovered on first use."""
        return OIDCIssuer(
            self.api_url + DISCOVERY_PATH,
            expected_issuer=None,
            fetch_keys_from_discovery_host=True,
            bearer_token=self.service_account_token,
            tls=self.tls_context(),
            **options,
        )
