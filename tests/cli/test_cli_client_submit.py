"""`workqueue-service submit` against a running service."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from cli_client_support import module_service, run_cli, run_cli_together, submit_args
from live_app import free_port
from mr_harness import PROJECT


@pytest.fixture(scope="module")
def service(server_url, template_url):
    yield from module_service(server_url, template_url)


def test_submit_prints_only_the_id_of_the_stored_item(service, tmp_path):
    spec = tmp_path / "kernel.spec"
    spec.write_text("Version: 2\n")
    result = run_cli(*submit_args("--file", f"{spec}:kernel.spec"), url=service.url)
    assert result.returncode == 0, result.stderr
    item_id = result.stdout.strip()
    assert result.stdout == f"{uuid.UUID(item_id)}\n"
    item = service.http.get(f"/api/work-items/{item_id}").json()
    assert item["caller_identity"] == "dev-user"
    assert item["details"]["project"] == PROJECT
    assert item["details"]["file_actions"] == [
        {
            "action": "update",
            "file_path": "kernel.spec",
            "content": "Version: 2\n",
            "encoding": "text",
        }
    ]


def test_every_file_flag_and_binary_content_reach_the_stored_item(service, tmp_path):
    text = tmp_path / "kernel.spec"
    text.write_text("Version: 3\nnaïve ✓\n", encoding="utf-8")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)))  # not UTF-8
    with_nul = tmp_path / "nul.dat"
    with_nul.write_bytes(b"valid\0utf-8\n")  # UTF-8, but a NUL byte makes it binary
    submitted = run_cli(
        *submit_args(
            "--file",
            f"{text}:kernel.spec",
            "--create",
            f"{binary}:assets/blob.bin",
            "--create",
            f"{with_nul}:assets/nul.dat",
            "--delete",
            "README.md",
            "--move",
            "patches/keep.patch:patches/kept.patch",
            "--target-branch",
            "main",
            "--description",
            "Automated sync",
            "--package",
            "kernel",
            "--change-kind",
            "sync",
            "--label",
            "bot",
            "--label",
            "sync",
            "--no-auto-merge",
            "--json",
        ),
        url=service.url,
    )
    assert submitted.returncode == 0, submitted.stderr
    answer = json.loads(submitted.stdout)
    assert answer["outcome"] == "created"
    assert answer["phase"] == "active"

    shown = run_cli("status", "--id", answer["id"], "--json", url=service.url)
    assert shown.returncode == 0, shown.stderr
    details = json.loads(shown.stdout)["details"]
    assert details["file_actions"] == [
        {
            "action": "update",
            "file_path": "kernel.spec",
            "content": "Version: 3\nnaïve ✓\n",
            "encoding": "text",
        },
        {
            "action": "create",
            "file_path": "assets/blob.bin",
            "content": base64.b64encode(bytes(range(256))).decode(),
            "encoding": "base64",
        },
        {
            "action": "create",
            "file_path": "assets/nul.dat",
            "content": base64.b64encode(b"valid\0utf-8\n").decode(),
            "encoding": "base64",
        },
        {"action": "delete", "file_path": "README.md"},
        {
            "action": "move",
            "file_path": "patches/kept.patch",
            "previous_path": "patches/keep.patch",
            # the service stores the schema's defaults of a move without content
            "content": None,
            "encoding": "text",
        },
    ]
    assert (details["target_branch"], details["description"]) == ("main", "Automated sync")
    assert (details["package"], details["change_kind"]) == ("kernel", "sync")
    assert (details["labels"], details["auto_merge"]) == (["bot", "sync"], False)


def test_a_refused_submission_names_the_field_and_the_flag(service, tmp_path):
    local = tmp_path / "ci.yml"
    local.write_text("stages: []\n")
    result = run_cli(*submit_args("--file", f"{local}:.gitlab-ci.yml"), url=service.url)
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: body.file_actions.0.file_path: ")
    assert "blocklist" in line
    assert f"--file {local}:.gitlab-ci.yml" in line


def test_bad_local_input_is_a_usage_error_before_any_request(tmp_path):
    # Nothing listens there: a request would end with exit 3, not 2.
    closed = f"http://127.0.0.1:{free_port()}"
    missing, malformed = run_cli_together(
        submit_args("--create", f"{tmp_path / 'missing.txt'}:new.txt"),
        submit_args("--file", "kernel.spec"),
        url=closed,
    )
    for result in (missing, malformed):
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert missing.stderr == (
        f"error: --create '{tmp_path / 'missing.txt'}:new.txt': "
        f"cannot read {tmp_path / 'missing.txt'}: No such file or directory\n"
    )
    assert malformed.stderr == (
        "error: --file 'kernel.spec': expected LOCAL:REPO, e.g. ./kernel.spec:kernel.spec\n"
    )
