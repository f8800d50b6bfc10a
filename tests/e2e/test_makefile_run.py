"""`make run` as a developer uses it: the server is make's own child, so stopping make stops it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from harness import wait_until

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_sigterm_to_make_stops_the_server_and_its_postgres(tmp_path):
    config = tmp_path / "config.yml"
    config.write_text("handled_types: {}\n")
    data_dir = tmp_path / "data"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
    make = subprocess.Popen(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(REPOSITORY),
            "-o",
            "install",  # the test's own environment is the installation
            "run",
            f"VENV={sys.prefix}",
            f"CONFIG={config}",
            f"DATA_DIR={data_dir}",
            f"SERVE_FLAGS=--port {port}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        # Long only for a machine busy with other tests: it returns once ready.
        wait_until(ready, timeout=120, what="the service started by make run")
        assert (data_dir / "pgdata").is_dir()  # DATA_DIR is where its database lives
        postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
        make.send_signal(signal.SIGTERM)
        output, _ = make.communicate(timeout=60)
    finally:
        if make.poll() is None:
            make.kill()
            make.communicate()
        elif make.stdout is not None:
            # Ended on its own: its pipe, left open, would warn in a later test's GC.
            make.stdout.close()
    assert "stopped the embedded PostgreSQL cluster" in output, output
    assert "stopped on request" in output
    assert "Traceback" not in output
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()
    assert (
        not Path(f"/proc/{postmaster}").exists()
        or "zombie" in Path(f"/proc/{postmaster}/status").read_text()
    )
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
