"""`serve` on a port another process holds: one line, exit 3, nothing started for nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys


def test_a_busy_port_is_one_line_and_exit_3_before_the_database_starts(tmp_path):
    config = tmp_path / "config.yml"
    config.write_text("handled_types: {}\n")
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    env["WORKQUEUE_SERVICE_CONFIG"] = str(config)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "workqueue",
                "serve",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr == (
        f"error: cannot listen on 127.0.0.1:{port}: address already in use "
        "(is another server running there? stop it or choose another --port)\n"
    )
    assert not data_dir.exists()  # no embedded PostgreSQL was initialised


def test_a_host_that_does_not_resolve_is_one_line_and_exit_3(tmp_path):
    config = tmp_path / "config.yml"
    config.write_text("handled_types: {}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    env["WORKQUEUE_SERVICE_CONFIG"] = str(config)
    result = subprocess.run(
        [sys.executable, "-m", "workqueue", "serve", "--host", "no-such-host.invalid"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 3
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: cannot listen on no-such-host.invalid:8080: ")
