"""`workqueue-service submit --idempotency-key` against a running service, and the
documented examples (docs/reference/cli.md, those of the operations guide) run as written.

The service admits `mr-service/` branches, as the examples assume; their local
files (`/path/to/...`) are made in a temporary directory, the only change.
"""

from __future__ import annotations

import re
import shlex
import uuid
from pathlib import Path

import pytest
from cli_client_support import module_service, run_cli

DOCS_CLI = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"
PROJECT = "org/group/project"
FILES = {"README.md": "# project\n", "sources.spec": "Version: 1\n"}
_SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)


@pytest.fixture(scope="module")
def service(server_url, template_url):
    yield from module_service(
        server_url,
        template_url,
        mr_options={"source_branch_prefix": "mr-service/"},
        projects={PROJECT: FILES},
    )


def documented_submissions() -> list[list[str]]:
    """Every `workqueue-service submit ... --idempotency-key` command of the CLI reference."""
    commands = []
    for block in _SH_BLOCK.findall(DOCS_CLI.read_text()):
        for command in block.replace("\\\n", " ").splitlines():
            words = shlex.split(command, comments=True)
            if words[:2] == ["workqueue-service", "submit"] and "--idempotency-key" in words:
                commands.append(words[1:])
    return commands


def with_local_files(words: list[str], directory: Path) -> list[str]:
    """The command with each `/path/to/...` local file made under `directory`."""
    placed = []
    for word in words:
        if not word.startswith("/path/to/"):
            placed.append(word)
            continue
        local, _, repo = word.rpartition(":")
        path = directory / local.removeprefix("/path/to/")
        path.write_text(f"content for {repo}\n")
        placed.append(f"{path}:{repo}")
    return placed


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_the_operations_guide_examples_run_as_written(service, tmp_path):
    commands = documented_submissions()
    assert len(commands) == 2, "the CLI reference lost its --idempotency-key examples"
    for words in commands:
        command = with_local_files(words, tmp_path)
        first = run_cli(*command, url=service.url)
        assert first.returncode == 0, first.stderr
        item_id = first.stdout.strip()
        assert first.stdout == f"{uuid.UUID(item_id)}\n"
        # Run again, as a script that lost the answer would: the same item, nothing new.
        again = run_cli(*command, url=service.url)
        assert (again.returncode, again.stdout) == (0, first.stdout), again.stderr
        item = service.http.get(f"/api/work-items/{item_id}").json()
        details = item["details"]
        assert (details["project"], details["source_branch"], details["title"]) == (
            option(words, "--project"),
            option(words, "--source-branch"),
            option(words, "--title"),
        )
        assert (details["package"], details["change_kind"]) == ("kernel", "sync")
        assert item["generation"] == 1
    # The module's other tests share the service (in any order): count these branches only.
    branches = {option(words, "--source-branch") for words in commands}
    listed = service.http.get("/api/work-items/mr", params={"project": PROJECT}).json()
    assert sum(item["details"]["source_branch"] in branches for item in listed["items"]) == 2


def test_the_same_key_with_other_content_exits_1_naming_the_header(service, tmp_path):
    spec = tmp_path / "sources.spec"
    spec.write_text("Version: 2\n")
    args = (
        "submit",
        "--project",
        PROJECT,
        "--source-branch",
        "mr-service/other-1",
        "--commit-message",
        "Sync sources",
        "--file",
        f"{spec}:sources.spec",
        "--idempotency-key",
        "other-1",
    )
    assert run_cli(*args, "--title", "Sync sources", url=service.url).returncode == 0
    changed = run_cli(*args, "--title", "Sync sources again", url=service.url)
    assert changed.returncode == 1
    assert changed.stderr.startswith("error: header.Idempotency-Key: this Idempotency-Key")


@pytest.mark.parametrize(
    "key",
    ["", "k" * 256, "clé", "tab\there", " padded"],
    ids=["empty", "long", "é", "tab", "space"],
)
def test_a_key_the_service_would_refuse_is_a_usage_error(service, tmp_path, key):
    spec = tmp_path / "sources.spec"
    spec.write_text("Version: 3\n")
    branch = f"mr-service/bad-key-{uuid.uuid4().hex[:8]}"
    refused = run_cli(
        "submit",
        "--project",
        PROJECT,
        "--source-branch",
        branch,
        "--title",
        "Sync",
        "--commit-message",
        "Sync",
        "--file",
        f"{spec}:sources.spec",
        "--idempotency-key",
        key,
        url=service.url,
    )
    assert refused.returncode == 2, refused.stderr
    assert "--idempotency-key must" in refused.stderr
    listed = service.http.get("/api/work-items/mr", params={"source_branch": branch}).json()
    assert listed["items"] == []
