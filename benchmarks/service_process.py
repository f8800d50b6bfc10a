"""A `workqueue-service serve` process for benchmarks, started the way it is deployed.

Shared by `scale.py` and `soak.py`: both measure the service through the same
path a caller uses (HTTP to a separate process), and both read the process's
resident memory and thread count from `/proc`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy.engine import URL

GITLAB_TOKEN = "bench-token"  # noqa: S105 - the simulator's token
WEBHOOK_SECRET = "bench-webhook-secret"  # noqa: S105 - local benchmark secret
LOCAL_USER = "bench"


@dataclass
class ServiceProcess:
    process: subprocess.Popen[bytes]
    base_url: str
    startup_seconds: float

    def rss_mib(self) -> float:
        return _status_field(self.process.pid, "VmRSS") / 1024

    def threads(self) -> int:
        return int(_status_field(self.process.pid, "Threads"))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def _status_field(pid: int, name: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith(f"{name}:"):
            return float(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no {name}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_config(workdir: Path, gitlab_url: str, *, workers: int = 10) -> Path:
    """Config for the `mr` type against `gitlab_url`, with caller limits out of the way."""
    config = workdir / "config.yml"
    config.write_text(
        f"processing:\n  workers: {workers}\n"
        "authorization:\n  limits:\n"
        "    max_live_items_per_caller: 1000000\n"
        "    submissions_per_minute_per_caller: 1000000\n"
        f"handled_types:\n  mr:\n    gitlab_url: {gitlab_url}\n",
        encoding="utf-8",
    )
    return config


def start_service(url: URL, config: Path, log_path: Path) -> ServiceProcess:
    """`serve` on a free port, JSON logs to `log_path`; returns once `/readyz` answers 200."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url.render_as_string(hide_password=False),
        "WORKQUEUE_SERVICE_CONFIG": str(config),
        "WORKQUEUE_SERVICE_GITLAB_TOKEN": GITLAB_TOKEN,
        "WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "WORKQUEUE_SERVICE_LOCAL_AUTH_USER": LOCAL_USER,
    }
    command = [sys.executable, "-m", "workqueue", "serve", "--port", str(port)]
    command += ["--log-format", "json", "--log-level", "warning"]
    started = time.perf_counter()
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service exited with {process.returncode}; see {log_path}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return ServiceProcess(process, base, time.perf_counter() - started)
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"the service did not become ready; see {log_path}")


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
