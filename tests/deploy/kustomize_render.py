"""A small `kustomize build` for the features deploy/kubernetes uses, in pure Python.

No kustomize binary can be installed here (it is not on PyPI), so the tests
render the overlays themselves. Supported, following kustomize's semantics:

- `resources` (files, and directories holding a Kustomization),
- `components` (a Component's resources, generators and patches act on
  what the including kustomization has accumulated so far),
- `configMapGenerator` with `files`/`literals`, a content-hash name suffix
  computed like kustomize's (`api/hasher`), and the references to it in pod
  specs rewritten; `behavior: replace` of a ConfigMap generated further down,
- `namespace` (set on every resource: all of ours are namespaced),
- `patches` with `path` or inline `patch`, as strategic merge patches for
  the list fields these manifests patch (merge keys as Kubernetes declares
  them: containers/volumes/env by `name`, volumeMounts by `mountPath`,
  container ports by `containerPort`, Service ports by `port`); any other
  list is replaced, as a strategic merge does for lists without a merge key,
- `images` (`newName`, `newTag`, `digest`).

Anything else in a kustomization is refused (`UnsupportedError`), so a new
feature in the manifests cannot be silently ignored by the tests.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_KEYS = {
    "apiVersion",
    "kind",
    "resources",
    "components",
    "configMapGenerator",
    "patches",
    "images",
    "namespace",
}
GENERATED_FROM = "x-rendered-from-generator"  # internal mark, removed from the output
# (parent field, list field) -> merge key, from the Kubernetes API's patchMergeKey.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
}
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"}

Resource = dict[str, Any]


class UnsupportedError(Exception):
    """The kustomization uses something this renderer does not implement."""


def build(directory: Path) -> list[Resource]:
    """What `kustomize build <directory>` prints, as a list of resources."""
    resources = _build(directory)
    for resource in resources:
        resource.pop(GENERATED_FROM, None)
    return resources


def _build(directory: Path) -> list[Resource]:
    kustomization = _load_kustomization(directory)
    if kustomization.get("kind", "Kustomization") != "Kustomization":
        raise UnsupportedError(f"{directory}: a {kustomization['kind']} cannot be built alone")
    resources: list[Resource] = []
    _apply(directory, kustomization, resources)
    return resources


def _load_kustomization(directory: Path) -> dict[str, Any]:
    for name in KUSTOMIZATION_FILES:
        path = directory / name
        if path.is_file():
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            unknown = set(data) - SUPPORTED_KEYS
            if unknown:
                raise UnsupportedError(f"{path}: unsupported keys {sorted(unknown)}")
            return dict(data)
    raise FileNotFoundError(f"no kustomization in {directory}")


def _apply(directory: Path, kustomization: dict[str, Any], resources: list[Resource]) -> None:
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        resources.extend(_build(path) if path.is_dir() else load_documents(path))
    for entry in kustomization.get("components", []):
        path = (directory / entry).resolve()
        component = _load_kustomization(path)
        if component.get("kind") != "Component":
            raise UnsupportedError(f"{path}: components must be of kind Component")
        _apply(path, component, resources)
    renamed = _generate(directory, kustomization, resources)
    for patch in kustomization.get("patches", []):
        _apply_patch(directory, patch, resources)
    for image in kustomization.get("images", []):
        _set_image(image, resources)
    if renamed:
        for resource in resources:
            _rename_config_map_references(resource, renamed)
    if "namespace" in kustomization:
        for resource in resources:
            resource["metadata"]["namespace"] = kustomization["namespace"]
    _check_unique(directory, resources)


def _generate(
    directory: Path, kustomization: dict[str, Any], resources: list[Resource]
) -> dict[str, str]:
    """Add the generated ConfigMaps; returns old name -> hashed name for the references."""
    renamed: dict[str, str] = {}
    for generator in kustomization.get("configMapGenerator", []):
        config_map = _generate_config_map(directory, generator)
        renamed[generator["name"]] = config_map["metadata"]["name"]
        if generator.get("behavior", "create") == "replace":
            [old] = [r for r in resources if r.get(GENERATED_FROM) == generator["name"]]
            renamed[old["metadata"]["name"]] = config_map["metadata"]["name"]
            resources.remove(old)
        resources.append(config_map)
    return renamed


def load_documents(path: Path) -> list[Resource]:
    documents = [
        document
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if document is not None
    ]
    for document in documents:
        if not isinstance(document, dict) or "kind" not in document:
            raise UnsupportedError(f"{path}: every document must be a resource with a kind")
    return documents


def _check_unique(directory: Path, resources: list[Resource]) -> None:
    seen: set[tuple[str, str]] = set()
    for resource in resources:
        key = (resource["kind"], resource["metadata"]["name"])
        if key in seen:
            raise UnsupportedError(f"{directory}: {key} appears twice")  # kustomize refuses too
        seen.add(key)


# -- configMapGenerator --------------------------------------------------------


def _generate_config_map(directory: Path, generator: dict[str, Any]) -> Resource:
    unknown = set(generator) - {"name", "files", "literals", "behavior"}
    if generator.get("behavior", "create") not in {"create", "replace"}:
        raise UnsupportedError(f"configMapGenerator: behavior {generator['behavior']}")
    if unknown:
        raise UnsupportedError(f"configMapGenerator: unsupported keys {sorted(unknown)}")
    data: dict[str, str] = {}
    for entry in generator.get("files", []):
        key, _, file_name = entry.rpartition("=")
        file_path = directory / file_name
        data[key or file_path.name] = file_path.read_text(encoding="utf-8")
    for literal in generator.get("literals", []):
        key, _, value = literal.partition("=")
        data[key] = value
    name = generator["name"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-{config_map_hash(name, data)}"},
        "data": data,
        GENERATED_FROM: name,
    }


def config_map_hash(name: str, data: dict[str, str]) -> str:
    """kustomize's suffix: sha256 of the Go-JSON encoding, 10 hex digits made unambiguous."""
    encoded = json.dumps(
        {"data": data, "kind": "ConfigMap", "name": name},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    # Go's encoding/json escapes these; kustomize hashes what Go produces.
    for character, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        encoded = encoded.replace(character, escape)
    digest = hashlib.sha256(encoded.encode("utf-8")).hexdigest()[:10]
    return digest.translate(str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"}))


def _rename_config_map_references(resource: Resource, renamed: dict[str, str]) -> None:
    for pod in pod_specs(resource):
        for volume in pod.get("volumes", []):
            if "configMap" in volume:
                name = volume["configMap"]["name"]
                volume["configMap"]["name"] = renamed.get(name, name)
        for container in all_containers(pod):
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    name = source["configMapRef"]["name"]
                    source["configMapRef"]["name"] = renamed.get(name, name)
            for variable in container.get("env", []):
                reference = variable.get("valueFrom", {}).get("configMapKeyRef")
                if reference is not None:
                    reference["name"] = renamed.get(reference["name"], reference["name"])


# -- patches -------------------------------------------------------------------


def _apply_patch(directory: Path, entry: dict[str, Any], resources: list[Resource]) -> None:
    unknown = set(entry) - {"path", "patch"}
    if unknown:
        raise UnsupportedError(f"patches: unsupported keys {sorted(unknown)} (targets, options)")
    text = (directory / entry["path"]).read_text(encoding="utf-8") if "path" in entry else None
    patch = yaml.safe_load(text if text is not None else entry["patch"])
    if not isinstance(patch, dict):
        raise UnsupportedError("patches: only strategic merge patches (a mapping) are supported")
    matches = [
        resource
        for resource in resources
        if resource["kind"] == patch["kind"]
        and resource["metadata"]["name"] == patch["metadata"]["name"]
    ]
    if len(matches) != 1:
        raise UnsupportedError(
            f"patch for {patch['kind']}/{patch['metadata']['name']} "
            f"matches {len(matches)} resources"
        )
    merged = strategic_merge(matches[0], patch)
    matches[0].clear()
    matches[0].update(merged)


def strategic_merge(original: Any, patch: Any, field: str = "", parent: str = "") -> Any:
    """Merge `patch` into a copy of `original` the way `kubectl`/kustomize do."""
    if isinstance(original, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(original)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)  # `key: null` deletes
            elif key in merged:
                merged[key] = strategic_merge(merged[key], value, key, field)
            else:
                merged[key] = copy.deepcopy(value)
        return merged
    if isinstance(original, list) and isinstance(patch, list):
        key = _merge_key(field, parent)
        if key is None:
            return copy.deepcopy(patch)  # lists without a merge key are replaced
        merged_list = copy.deepcopy(original)
        for element in patch:
            existing = next((item for item in merged_list if item.get(key) == element[key]), None)
            if existing is None:
                merged_list.append(copy.deepcopy(element))
            else:
                merged_list[merged_list.index(existing)] = strategic_merge(
                    existing, element, field, parent
                )
        return merged_list
    return copy.deepcopy(patch)


def _merge_key(field: str, parent: str) -> str | None:
    if field == "ports":
        # Container ports merge by containerPort, a Service's by port.
        return "containerPort" if parent in {"containers", "initContainers"} else "port"
    return MERGE_KEYS.get(field)


# -- images ----------------------------------------------------------------------


def _set_image(image: dict[str, Any], resources: list[Resource]) -> None:
    unknown = set(image) - {"name", "newName", "newTag", "digest"}
    if unknown:
        raise UnsupportedError(f"images: unsupported keys {sorted(unknown)}")
    for resource in resources:
        for pod in pod_specs(resource):
            for container in all_containers(pod):
                name, tag = _split_image(container["image"])
                if name != image["name"]:
                    continue
                new_name = image.get("newName", name)
                if "digest" in image:
                    container["image"] = f"{new_name}@{image['digest']}"
                elif "newTag" in image:
                    container["image"] = f"{new_name}:{image['newTag']}"
                else:
                    container["image"] = new_name + tag


def _split_image(reference: str) -> tuple[str, str]:
    """`name`, and the `:tag` or `@digest` suffix (a port in the registry is not a tag)."""
    if "@" in reference:
        name, _, digest = reference.partition("@")
        return name, f"@{digest}"
    last_segment = reference.rsplit("/", 1)[-1]
    if ":" in last_segment:
        name, _, tag = reference.rpartition(":")
        return name, f":{tag}"
    return reference, ""


# -- helpers shared with the tests ----------------------------------------------


def pod_specs(resource: Resource) -> list[dict[str, Any]]:
    if resource["kind"] in POD_TEMPLATE_KINDS:
        return [resource["spec"]["template"]["spec"]]
    if resource["kind"] == "CronJob":
        return [resource["spec"]["jobTemplate"]["spec"]["template"]["spec"]]
    return []


def all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod.get("containers", [])]
