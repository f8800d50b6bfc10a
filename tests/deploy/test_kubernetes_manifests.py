"""deploy/kubernetes: every overlay rendered, validated offline, and checked for what it promises.

Built-in kinds are validated by `kubernetes-validate` (schemas bundled in the
package, strict: unknown fields are errors) against a pinned Kubernetes
version. The custom resources (ServiceMonitor, Route, CloudNativePG Cluster)
have no bundled schema; `crd_schemas.py` checks their structure instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import typer.main
from crd_schemas import CUSTOM_RESOURCE_SCHEMAS
from kustomize_build import all_containers, build, pod_specs

from workqueue.cli.main import app
from workqueue.config import load_config
from workqueue.settings import Settings
from workqueue.types.catalog import build_registry
from workqueue.types.plugin import install_context

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
# The oldest release the manifests must work on (matchLabelKeys in topology
# spread constraints is beta there and on by default).
KUBERNETES_VERSION = "1.32.0"
BUILDS = [
    "base",
    "overlays/openshift",
    "overlays/cloudnative-pg",
    "overlays/openshift-cloudnative-pg",
]
APP_LABELS = {"app.kubernetes.io/name": "workqueue-service"}
SERVER_LABELS = {**APP_LABELS, "app.kubernetes.io/component": "server"}
# Secrets the operator creates by hand (docs/howto/deploy-kubernetes.md), with their keys.
HAND_MADE_SECRETS = {
    "workqueue-service": {"gitlab-token", "gitlab-webhook-secret", "sentry-dsn"},
    "workqueue-service-database": {"uri"},
    "workqueue-service-proxy": {"session_secret"},
}

Resource = dict[str, Any]
WRITABLE = "/tmp"  # noqa: S108 - the container's only writable path, an emptyDir


@pytest.fixture(scope="module", params=BUILDS)
def rendered(request) -> tuple[str, list[Resource]]:
    return request.param, build(KUBERNETES / request.param)


def _one(resources: list[Resource], kind: str, name: str | None = None) -> Resource:
    found = [
        resource
        for resource in resources
        if resource["kind"] == kind and (name is None or resource["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"{kind} {name or ''}: {len(found)} found"
    return found[0]


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(container for container in all_containers(pod) if container["name"] == name)


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_every_resource_is_valid_for_the_pinned_kubernetes(rendered):
    _, resources = rendered
    custom = 0
    for resource in resources:
        schema = CUSTOM_RESOURCE_SCHEMAS.get((resource["apiVersion"], resource["kind"]))
        if schema is not None:
            jsonschema.validate(resource, schema)
            custom += 1
            continue
        # Raises on an unknown kind too: nothing goes unvalidated.
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
    assert custom >= 1  # at least the ServiceMonitor


def test_the_validator_works_offline_and_refuses_a_typo():
    deployment = _one(build(KUBERNETES / "base"), "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 3}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_three_replicas_spread_and_protected_by_the_budget(rendered):
    _, resources = rendered
    deployment = _one(resources, "Deployment", "workqueue-service")
    assert deployment["spec"]["replicas"] == 3
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == SERVER_LABELS
    assert _matches(SERVER_LABELS, pod_labels)
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {constraint["topologyKey"] for constraint in spread} == {
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    }
    for constraint in spread:
        assert _matches(constraint["labelSelector"]["matchLabels"], pod_labels)
    budget = _one(resources, "PodDisruptionBudget")
    assert _matches(budget["spec"]["selector"]["matchLabels"], pod_labels)
    assert budget["spec"]["maxUnavailable"] == 1
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def _serve_arguments(container: dict[str, Any]) -> dict[str, Any]:
    command = typer.main.get_command(app)
    serve = command.commands["serve"]  # type: ignore[attr-defined]
    assert container["args"][0] == "serve"
    return dict(serve.make_context("serve", list(container["args"][1:])).params)


def test_replicas_never_migrate_and_wait_for_the_job(rendered):
    _, resources = rendered
    pod = _one(resources, "Deployment")["spec"]["template"]["spec"]
    server = _container(pod, "workqueue-service")
    options = _serve_arguments(server)
    assert options["no_migrate"] is True
    assert options["host"] == "0.0.0.0"  # noqa: S104 - probes and the Service reach the pod IP
    port = next(p for p in server["ports"] if p["name"] == "http")["containerPort"]
    assert options["port"] == port == 8080
    waiter = pod["initContainers"][0]
    assert waiter["command"][:2] == ["python", "/opt/workqueue/libexec/wait_for_schema.py"]
    job = _one(resources, "Job", "workqueue-service-migrate")
    job_pod = job["spec"]["template"]["spec"]
    migrate = job_pod["containers"][0]
    assert migrate["args"] == ["migrate"]
    # Same image everywhere: the Job migrates to the head the replicas wait for.
    assert waiter["image"] == server["image"] == migrate["image"]
    assert (
        _env(waiter)["DATABASE_URL"]
        == _env(server)["DATABASE_URL"]
        == _env(migrate)["DATABASE_URL"]
    )


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {
        variable["name"]: variable.get("valueFrom", variable.get("value"))
        for variable in container["env"]
    }


def test_probes_use_healthz_and_readyz_on_the_named_port(rendered):
    _, resources = rendered
    server = _container(
        _one(resources, "Deployment")["spec"]["template"]["spec"], "workqueue-service"
    )
    assert server["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert server["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert server["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def test_every_container_is_restricted_with_resources_and_a_writable_tmp_only(rendered):
    _, resources = rendered
    for resource in resources:
        for pod in pod_specs(resource):
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for container in all_containers(pod):
                where = f"{resource['kind']}/{container['name']}"
                context = container["securityContext"]
                assert context["allowPrivilegeEscalation"] is False, where
                assert context["readOnlyRootFilesystem"] is True, where
                assert context["capabilities"] == {"drop": ["ALL"]}, where
                assert "privileged" not in context, where
                for kind in ("requests", "limits"):
                    assert {"cpu", "memory"} <= set(container["resources"][kind]), where
            volumes = {volume["name"]: volume for volume in pod["volumes"]}
            for container in all_containers(pod):
                if container["image"].startswith("quay.io/openshift/"):
                    continue  # the proxy writes nothing
                mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
                assert "emptyDir" in volumes[mounts[WRITABLE]["name"]]
                writable = [path for path, mount in mounts.items() if not mount.get("readOnly")]
                assert writable == [WRITABLE], where


def test_service_and_network_policy_reach_the_named_ports(rendered):
    _, resources = rendered
    deployment = _one(resources, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    named_ports = {
        port["name"]: port["containerPort"]
        for container in pod["containers"]
        for port in container.get("ports", [])
    }
    service = _one(resources, "Service")
    assert _matches(
        service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"]
    )
    allowed = {
        port["port"]
        for rule in _one(resources, "NetworkPolicy")["spec"]["ingress"]
        for port in rule["ports"]
    }
    for port in service["spec"]["ports"]:
        assert port["targetPort"] in named_ports
        assert named_ports[port["targetPort"]] in allowed
    policy = _one(resources, "NetworkPolicy")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _matches(policy["spec"]["podSelector"]["matchLabels"], pod_labels)
    job_labels = _one(resources, "Job")["spec"]["template"]["metadata"]["labels"]
    assert _matches(policy["spec"]["podSelector"]["matchLabels"], job_labels)
    egress_ports = {port["port"] for rule in policy["spec"]["egress"] for port in rule["ports"]}
    assert {53, 443, 5432} <= egress_ports


def test_service_monitor_scrapes_metrics_of_the_service(rendered):
    _, resources = rendered
    monitor = _one(resources, "ServiceMonitor")
    service = _one(resources, "Service")
    assert _matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}


def test_secrets_are_references_to_known_secrets_and_keys(rendered):
    name, resources = rendered
    assert not [resource for resource in resources if resource["kind"] == "Secret"]
    clusters = [
        resource["metadata"]["name"] for resource in resources if resource["kind"] == "Cluster"
    ]
    expected = dict(HAND_MADE_SECRETS)
    for cluster in clusters:
        expected[f"{cluster}-app"] = {"uri"}  # created by CloudNativePG
    used: set[str] = set()
    for resource in resources:
        for pod in pod_specs(resource):
            for container in all_containers(pod):
                for variable in container.get("env", []):
                    reference = variable.get("valueFrom", {}).get("secretKeyRef")
                    if reference:
                        assert reference["key"] in expected[reference["name"]], variable
                        used.add(reference["name"])
            for volume in pod.get("volumes", []):
                if "secret" in volume:
                    used.add(volume["secret"]["secretName"])
    database = {"workqueue-db-app"} if clusters else {"workqueue-service-database"}
    assert database <= used
    assert "workqueue-service" in used
    if clusters:
        assert "workqueue-service-database" not in used, name


def test_config_map_holds_a_configuration_the_service_accepts(rendered, tmp_path):
    _, resources = rendered
    config_map = next(r for r in resources if r["kind"] == "ConfigMap")
    pod = _one(resources, "Deployment")["spec"]["template"]["spec"]
    [config_volume] = [v for v in pod["volumes"] if "configMap" in v]
    assert config_volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert re.fullmatch(r"workqueue-service-config-[a-z0-9]{10}", config_map["metadata"]["name"])
    server = _container(pod, "workqueue-service")
    mount = next(m for m in server["volumeMounts"] if m["name"] == config_volume["name"])
    assert Path(mount["mountPath"]) / "config.yml" == Settings().config_path
    path = tmp_path / "config.yml"
    path.write_text(config_map["data"]["config.yml"])
    config = load_config(path)
    # The rules that grant submit/retry must be scoped to projects (docs/reference/config.md).
    assert config.authorization.rules
    registry = build_registry(
        config.handled_types,
        install_context(Settings(WORKQUEUE_SERVICE_GITLAB_TOKEN="not-a-real-token")),
    )
    assert list(registry.item_types) == ["mr"]


def test_changing_the_configuration_changes_the_config_map_name(tmp_path):
    source = KUBERNETES / "base"
    copy = tmp_path / "base"
    copy.mkdir()
    for file in source.iterdir():
        (copy / file.name).write_text(file.read_text())
    before = _one(build(copy), "ConfigMap")["metadata"]["name"]
    (copy / "config.yml").write_text((copy / "config.yml").read_text() + "# changed\n")
    after = build(copy)
    assert _one(after, "ConfigMap")["metadata"]["name"] != before
    volumes = _one(after, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert _one(after, "ConfigMap")["metadata"]["name"] in [
        volume.get("configMap", {}).get("name") for volume in volumes
    ]


def _documented_proxy_flags() -> list[str]:
    """The flag table of docs/howto/authentication.md, section on the OAuth proxy."""
    text = (ROOT / "docs" / "howto" / "authentication.md").read_text()
    section = text.split("## OpenShift users through the OAuth proxy", 1)[1]
    flags = re.findall(r"^\| `(--[^`]+)` \|", section, flags=re.MULTILINE)
    return [flag.replace("\\|", "|") for flag in flags]


@pytest.mark.parametrize("build_name", ["overlays/openshift", "overlays/openshift-cloudnative-pg"])
def test_openshift_proxy_has_every_documented_flag_and_fronts_the_service(build_name):
    resources = build(KUBERNETES / build_name)
    pod = _one(resources, "Deployment")["spec"]["template"]["spec"]
    proxy = _container(pod, "oauth-proxy")
    documented = _documented_proxy_flags()
    assert "--pass-access-token" in documented
    assert "--cookie-refresh=1h" in documented
    for flag in documented:
        assert flag in proxy["args"], flag
    upstream = next(arg for arg in proxy["args"] if arg.startswith("--upstream="))
    server = _container(pod, "workqueue-service")
    assert upstream == f"--upstream=http://localhost:{server['ports'][0]['containerPort']}"
    # The bypass regex leaves bearer calls and webhooks to the service itself.
    bypass = next(arg for arg in proxy["args"] if arg.startswith("--bypass-auth-except-for="))
    guarded = re.compile(bypass.split("=", 1)[1])
    for path in ("/api/work-items/mr", "/api/webhooks/gitlab", "/healthz", "/readyz", "/metrics"):
        assert not guarded.search(path), path
    for path in ("/oauth/start", "/oauth/callback", "/api/work-items/me"):
        assert guarded.search(path), path
    route = _one(resources, "Route")
    service = _one(resources, "Service")
    assert route["spec"]["to"] == {
        "kind": "Service",
        "name": service["metadata"]["name"],
        "weight": 100,
    }
    proxy_port = next(
        p for p in service["spec"]["ports"] if p["name"] == route["spec"]["port"]["targetPort"]
    )
    assert proxy_port["targetPort"] == "proxy"
    tls_secret = service["metadata"]["annotations"][
        "service.beta.openshift.io/serving-cert-secret-name"
    ]
    assert tls_secret in {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    account = _one(resources, "ServiceAccount")
    assert '"name":"workqueue-service"' in account["metadata"]["annotations"][
        "serviceaccounts.openshift.io/oauth-redirectreference.primary"
    ].replace(" ", "")


@pytest.mark.parametrize(
    "build_name", ["overlays/cloudnative-pg", "overlays/openshift-cloudnative-pg"]
)
def test_cloudnative_pg_cluster_feeds_database_url_everywhere(build_name):
    resources = build(KUBERNETES / build_name)
    cluster = _one(resources, "Cluster")
    secret = f"{cluster['metadata']['name']}-app"
    for resource in resources:
        for pod in pod_specs(resource):
            for container in all_containers(pod):
                if container["name"] == "oauth-proxy":
                    continue
                reference = _env(container)["DATABASE_URL"]["secretKeyRef"]
                assert reference == {"name": secret, "key": "uri"}, container["name"]
    # Enough connections for three replicas at their pool maximum (config.md, "Sizing").
    config_map = _one(resources, "ConfigMap")
    workers = int(re.search(r"workers: (\d+)", config_map["data"]["config.yml"])[1])
    per_replica = 2 * (workers + 8) + 1
    connections = int(cluster["spec"]["postgresql"]["parameters"]["max_connections"])
    assert connections >= 3 * per_replica + 10


def _documented_overlay() -> str:
    """The `my-workqueue/kustomization.yaml` example of docs/howto/deploy-kubernetes.md."""
    text = (ROOT / "docs" / "howto" / "deploy-kubernetes.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    [overlay] = [block for block in blocks if block.startswith("# my-workqueue/kustomization")]
    return overlay


def test_the_overlay_the_deployment_guide_shows_renders_and_validates(tmp_path):
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")
    mine = tmp_path / "my-workqueue"
    mine.mkdir()
    overlay = _documented_overlay()
    assert 'newTag: "0.1.0"' in overlay
    (mine / "kustomization.yaml").write_text(overlay.replace('newTag: "0.1.0"', 'newTag: "9.9.9"'))
    config = (KUBERNETES / "base" / "config.yml").read_text()
    config = config.replace("https://gitlab.example.com", "https://gitlab.acme.test")
    (mine / "config.yml").write_text(config)
    resources = build(mine)
    for resource in resources:
        assert resource["metadata"]["namespace"] == "workqueue"
        schema = CUSTOM_RESOURCE_SCHEMAS.get((resource["apiVersion"], resource["kind"]))
        if schema is None:
            kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
        else:
            jsonschema.validate(resource, schema)
    config_map = _one(resources, "ConfigMap")  # the base's was replaced, not added to
    assert config_map["data"]["config.yml"] == config
    base_name = _one(build(KUBERNETES / "base"), "ConfigMap")["metadata"]["name"]
    assert config_map["metadata"]["name"] != base_name
    for resource in resources:
        for pod in pod_specs(resource):
            for volume in pod.get("volumes", []):
                if "configMap" in volume:
                    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
            for container in all_containers(pod):
                if container["name"] != "oauth-proxy":
                    assert container["image"].endswith("/workqueue-service:9.9.9")
    assert _one(resources, "Cluster")  # the overlay it starts from
