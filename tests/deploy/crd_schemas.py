"""Structural schemas for the custom resources in deploy/kubernetes.

kubernetes-validate bundles only the built-in API, and the CRDs' own
OpenAPI schemas cannot be downloaded here. These are written from the
operators' API references for the fields the manifests use, closed
(`additionalProperties: false`) at every level we write, so a misspelt or
misplaced field fails just as it would against the CRD:

- ServiceMonitor: Prometheus Operator, monitoring.coreos.com/v1
- Route: OpenShift, route.openshift.io/v1
- Cluster: CloudNativePG, postgresql.cnpg.io/v1

They do not replace the server-side validation against the installed CRDs
(`kubectl apply --dry-run=server`), which needs a cluster.
"""

from __future__ import annotations

from typing import Any

_NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
_QUANTITY = {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$"}
_DURATION = {"type": "string", "pattern": r"^([0-9]+(ms|s|m|h))+$"}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}


def _closed(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def _resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _closed(
        {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": _closed(
                {
                    "name": _NAME,
                    "namespace": _NAME,
                    "labels": _LABELS,
                    "annotations": _LABELS,
                },
                ["name"],
            ),
            "spec": spec,
        },
        ["apiVersion", "kind", "metadata", "spec"],
    )


_SELECTOR = _closed({"matchLabels": _LABELS})
_RESOURCES = _closed(
    {
        "requests": _closed({"cpu": _QUANTITY, "memory": _QUANTITY}),
        "limits": _closed({"cpu": _QUANTITY, "memory": _QUANTITY}),
    }
)

SERVICE_MONITOR = _resource(
    "monitoring.coreos.com/v1",
    "ServiceMonitor",
    _closed(
        {
            "selector": _SELECTOR,
            "namespaceSelector": _closed(
                {"matchNames": {"type": "array"}, "any": {"type": "boolean"}}
            ),
            "endpoints": {
                "type": "array",
                "minItems": 1,
                "items": _closed(
                    {
                        "port": {"type": "string"},
                        "path": {"type": "string", "pattern": "^/"},
                        "scheme": {"enum": ["http", "https"]},
                        "interval": _DURATION,
                        "scrapeTimeout": _DURATION,
                    },
                    ["port"],
                ),
            },
        },
        ["selector", "endpoints"],
    ),
)

ROUTE = _resource(
    "route.openshift.io/v1",
    "Route",
    _closed(
        {
            "host": {"type": "string"},
            "path": {"type": "string"},
            "to": _closed(
                {
                    "kind": {"const": "Service"},
                    "name": _NAME,
                    "weight": {"type": "integer", "minimum": 0, "maximum": 256},
                },
                ["kind", "name"],
            ),
            "port": _closed({"targetPort": {"type": ["string", "integer"]}}, ["targetPort"]),
            "tls": _closed(
                {
                    "termination": {"enum": ["edge", "passthrough", "reencrypt"]},
                    "insecureEdgeTerminationPolicy": {"enum": ["Allow", "None", "Redirect"]},
                    "destinationCACertificate": {"type": "string"},
                },
                ["termination"],
            ),
            "wildcardPolicy": {"enum": ["None", "Subdomain"]},
        },
        ["to"],
    ),
)

CLOUDNATIVE_PG_CLUSTER = _resource(
    "postgresql.cnpg.io/v1",
    "Cluster",
    _closed(
        {
            "instances": {"type": "integer", "minimum": 1},
            "imageName": {"type": "string"},
            "primaryUpdateStrategy": {"enum": ["unsupervised", "supervised"]},
            "bootstrap": _closed(
                {
                    "initdb": _closed(
                        {"database": {"type": "string"}, "owner": {"type": "string"}},
                        ["database", "owner"],
                    )
                }
            ),
            "postgresql": _closed(
                {
                    "parameters": {
                        "type": "object",
                        # Every parameter value is a string in the CRD.
                        "additionalProperties": {"type": "string"},
                    }
                }
            ),
            "storage": _closed({"size": _QUANTITY, "storageClass": {"type": "string"}}, ["size"]),
            "resources": _RESOURCES,
        },
        ["instances", "storage"],
    ),
)

CUSTOM_RESOURCE_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("route.openshift.io/v1", "Route"): ROUTE,
    ("postgresql.cnpg.io/v1", "Cluster"): CLOUDNATIVE_PG_CLUSTER,
}
