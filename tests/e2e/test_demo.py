"""`workqueue-service demo` as a newcomer runs it: a real process, its own database and GitLab."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DEMO_TIMEOUT = 60  # the promise: under a minute


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment() -> dict[str, str]:
    # Whatever the caller has set, the demo brings its own database, config and GitLab.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    env["DATABASE_URL"] = "postgresql://nobody@127.0.0.1:1/never-used"
    env["WORKQUEUE_SERVICE_CONFIG"] = "/nonexistent/config.yml"
    env["COLUMNS"] = "200"
    return env


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "workqueue", "demo", *args]


def _data_dir(output: str) -> Path:
    match = re.search(r"data directory\s+(\S+)", output)
    assert match, output
    return Path(match.group(1))


def test_the_demo_tells_a_whole_mr_life_and_cleans_up():
    port = _free_port()
    started = time.monotonic()
    result = subprocess.run(
        _command("--port", str(port)),
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - started < DEMO_TIMEOUT
    assert result.stderr == ""
    output = result.stdout
    assert "Traceback" not in output
    assert re.search(r"submitted workqueue/greeting: item \S+ created", output)
    assert re.search(r"CI pipeline \d+ passed on its head", output)
    assert re.search(r"merged MR !1: item completed \(merged\)", output)
    assert re.search(
        r"held back: MR !2 stays open, pipeline success, merge_blocker auto_merge_disabled: "
        r"auto_merge is off",
        output,
    )
    assert "resubmitted workqueue/held-back: outcome unchanged" in output
    assert f"dashboard: http://127.0.0.1:{port}/ui/" in output
    assert "demo finished in" in output
    assert not _data_dir(output).exists()  # a throwaway directory is thrown away


def test_keep_leaves_the_service_running_until_ctrl_c(tmp_path):
    port = _free_port()
    demo = subprocess.Popen(
        _command("--keep", "--port", str(port)),
        env=_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert demo.stdout is not None
        deadline = time.monotonic() + DEMO_TIMEOUT
        while not any(line.startswith("dashboard:") for line in lines):
            line = demo.stdout.readline()
            assert line, "".join(lines) + (demo.stderr.read() if demo.stderr else "")
            lines.append(line)
            assert time.monotonic() < deadline, "".join(lines)
        # The service goes on answering: the CLI, with the URL the demo printed, sees its items.
        listed = subprocess.run(
            [sys.executable, "-m", "workqueue", "status", "--json"],
            env={**_environment(), "WORKQUEUE_SERVICE_URL": f"http://127.0.0.1:{port}"},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        phases = sorted(item["phase"] for item in json.loads(listed.stdout)["items"])
        assert phases == ["active", "completed"]
        demo.send_signal(signal.SIGINT)
        rest, errors = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.communicate()
    output = "".join(lines) + rest
    data_dir = _data_dir(output)
    try:
        assert demo.returncode == 0, output + errors
        assert "Traceback" not in output + errors
        assert f"kept the data directory {data_dir}" in output
        assert "demo stopped after" in output
        assert (data_dir / "config.yml").is_file()
        log = (data_dir / "service.log").read_text()
        # The config is checked before the database starts, then installed to run: one warning.
        assert log.count("is plain http") == 1, log
        # Stopped cleanly: the embedded PostgreSQL is gone with the service.
        assert not (data_dir / "postgres" / "pgdata" / "postmaster.pid").exists()
    finally:
        subprocess.run(["rm", "-rf", str(data_dir)], check=False)


def test_a_busy_port_is_one_line_and_exit_3():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            _command("--port", str(port)),
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=DEMO_TIMEOUT,
            check=False,
        )
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr == (
        f"error: cannot listen on 127.0.0.1:{port}: address already in use "
        "(is another server running there? stop it or choose another --port)\n"
    )
