"""The manifest tests render with kubectl's own kustomize, installed by the dev extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kustomize_build import KUBECTL, KustomizeError, build


def _write(directory, files):
    for name, text in files.items():
        (directory / name).write_text(text)


def test_kubectl_is_the_one_the_dev_extra_installs_and_has_kustomize():
    assert Path(sys.prefix) in KUBECTL.parents  # this environment's, not one from PATH
    version = subprocess.run(
        [str(KUBECTL), "version", "--client"], capture_output=True, text=True, check=True
    ).stdout
    assert "Kustomize Version: v5." in version


def test_a_kustomization_kustomize_refuses_fails_with_its_message(tmp_path):
    _write(
        tmp_path,
        {
            "kustomization.yaml": "resources: [a.yaml]\npatches:\n  - path: p.yaml\n",
            "a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
            "p.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {x: y}\n",
        },
    )
    with pytest.raises(KustomizeError, match="no matches for Id ConfigMap"):
        build(tmp_path)


def test_every_rendered_document_comes_back_in_order(tmp_path):
    _write(
        tmp_path,
        {
            "kustomization.yaml": (
                "resources: [job.yaml]\nnamespace: ns\n"
                "images:\n  - {name: 'registry:5000/app', newTag: '2.0'}\n"
                "configMapGenerator:\n  - {name: settings, literals: [a=1]}\n"
            ),
            "job.yaml": (
                "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n"
                "spec: {template: {spec: {containers:\n"
                "  [{name: c, image: 'registry:5000/app:1.0',"
                " envFrom: [{configMapRef: {name: settings}}]}]}}}\n"
            ),
        },
    )
    config_map, job = build(tmp_path)
    assert config_map["kind"] == "ConfigMap"
    assert config_map["metadata"]["name"].startswith("settings-")
    assert config_map["metadata"]["namespace"] == "ns"
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry:5000/app:2.0"
    assert container["envFrom"] == [{"configMapRef": {"name": config_map["metadata"]["name"]}}]
