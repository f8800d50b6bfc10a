"""The renderer behind the manifest tests follows kustomize where the manifests rely on it."""

from __future__ import annotations

import pytest
from kustomize_render import UnsupportedError, build, config_map_hash, strategic_merge


def test_lists_with_a_merge_key_merge_by_it_and_others_are_replaced():
    original = {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "env": [{"name": "A", "value": "1"}],
                    "ports": [{"containerPort": 80}],
                },
            ],
            "tolerations": [{"key": "a"}],
        }
    }
    patch = {
        "spec": {
            "containers": [
                {"name": "app", "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]},
                {"name": "sidecar", "image": "proxy"},
            ],
            "tolerations": [{"key": "b"}],
        }
    }
    merged = strategic_merge(original, patch)
    app, sidecar = merged["spec"]["containers"]
    assert app["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
    assert app["ports"] == [{"containerPort": 80}]  # untouched by the patch
    assert sidecar == {"name": "sidecar", "image": "proxy"}
    assert merged["spec"]["tolerations"] == [{"key": "b"}]
    assert original["spec"]["containers"][0]["env"][0]["value"] == "1"  # not mutated


def test_service_ports_merge_by_port_and_null_deletes():
    original = {"spec": {"ports": [{"name": "http", "port": 8080}], "type": "ClusterIP"}}
    patch = {"spec": {"ports": [{"name": "proxy", "port": 8443}], "type": None}}
    assert strategic_merge(original, patch) == {
        "spec": {"ports": [{"name": "http", "port": 8080}, {"name": "proxy", "port": 8443}]}
    }


def test_config_map_hash_is_ten_characters_without_ambiguous_ones_and_follows_content():
    first = config_map_hash("config", {"config.yml": "a: 1\n"})
    assert len(first) == 10
    assert not set(first) & set("013ae")
    assert config_map_hash("config", {"config.yml": "a: 1\n"}) == first
    assert config_map_hash("config", {"config.yml": "a: 2\n"}) != first
    assert config_map_hash("other", {"config.yml": "a: 1\n"}) != first


def _write(directory, files):
    for name, text in files.items():
        (directory / name).write_text(text)


def test_unsupported_kustomization_features_are_refused(tmp_path):
    _write(
        tmp_path,
        {
            "kustomization.yaml": "resources: [a.yaml]\nnamePrefix: x-\n",
            "a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        },
    )
    with pytest.raises(UnsupportedError, match="namePrefix"):
        build(tmp_path)


def test_a_patch_must_match_exactly_one_resource(tmp_path):
    _write(
        tmp_path,
        {
            "kustomization.yaml": "resources: [a.yaml]\npatches:\n  - path: p.yaml\n",
            "a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
            "p.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {x: y}\n",
        },
    )
    with pytest.raises(UnsupportedError, match="matches 0 resources"):
        build(tmp_path)


def test_images_keep_the_registry_port_and_set_the_tag(tmp_path):
    _write(
        tmp_path,
        {
            "kustomization.yaml": (
                "resources: [job.yaml]\nimages:\n  - {name: 'registry:5000/app', newTag: '2.0'}\n"
            ),
            "job.yaml": (
                "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n"
                "spec: {template: {spec: {containers:\n"
                "  [{name: c, image: 'registry:5000/app:1.0'}]}}}\n"
            ),
        },
    )
    [job] = build(tmp_path)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "registry:5000/app:2.0"
