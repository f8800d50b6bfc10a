"""The system under test: one throwaway PostgreSQL cluster and N `workqueue-service serve`
replicas on it, each a real child process started as an operator would start it
(`python -m workqueue serve`, environment and config file only)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from live_app import free_port
from sqlalchemy.engine import URL

from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.engine import build_engine
from workqueue.db.migrate import upgrade_to_head
from workqueue.testing.gitlab_simulator import GitLabSimulator

WEBHOOK_SECRET = "chaos-webhook-secret"
LOCAL_USER = "chaos-caller"
# fsync off only: nothing here survives an OS crash, but a `pg_ctl -m immediate` restart
# keeps every acknowledged commit, because synchronous_commit stays on.
SERVER_SETTINGS = {"fsync": "off", "full_page_writes": "off", "max_connections": "200"}


class ChaosDatabase:
    """An embedded cluster of its own (a restart must not hit the session's cluster)."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="workqueue-chaos-pg-"))
        self.cluster = EmbeddedPostgres(
            self.directory, database="chaos", server_settings=SERVER_SETTINGS
        )
        self.url: URL = self.cluster.start()
        engine = build_engine(self.url, pool_size=1)
        try:
            upgrade_to_head(engine)
        finally:
            engine.dispose()

    @property
    def socket_path(self) -> Path:
        query = self.url.query
        return Path(str(query["host"])) / f".s.PGSQL.{query['port']}"

    @property
    def direct_url(self) -> str:
        """The URL a replica uses to reach this cluster without a proxy (unix socket)."""
        return self.url.render_as_string(hide_password=False)

    def tcp_url(self, port: int) -> str:
        """The URL a replica uses to reach this cluster through a proxy on `port`."""
        return f"postgresql://postgres@127.0.0.1:{port}/chaos"

    def restart_immediate(self) -> None:
        """`pg_ctl stop -m immediate` then start: every connection dies, no checkpoint."""
        self.cluster.kill()
        self.cluster.restart_server()

    def close(self) -> None:
        try:
            self.cluster.stop(mode="immediate")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def service_config(gitlab_url: str, *, workers: int = 3, **mr_section: Any) -> dict[str, Any]:
    return {
        # One caller (the local user) submits everything: lift its limits out of the way.
        "authorization": {
            "limits": {
                "max_live_items_per_caller": 100_000,
                "submissions_per_minute_per_caller": 100_000,
            }
        },
        "processing": {
            "workers": workers,
            "lease_seconds": 3,
            "heartbeat_seconds": 1,
            "item_deadline_seconds": 30,
            "safety_sweep_seconds": 5,
            "backoff_initial_seconds": 0.2,
            "backoff_max_seconds": 2,
            "max_attempts": 10,
        },
        "handled_types": {"mr": {"gitlab_url": gitlab_url, **mr_section}},
    }


class Replica:
    """One `serve` process; keeps its port across restarts so webhook senders need not care."""

    def __init__(
        self,
        name: str,
        database_url: str,
        config: dict[str, Any],
        workdir: Path,
        simulator: GitLabSimulator,
    ) -> None:
        self.name = name
        # A token of its own (same GitLab user): the request log names the replica.
        self._gitlab_token = f"token-{name}"
        simulator.add_bot_token(self._gitlab_token, name)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._workdir = workdir
        self._config_path = workdir / f"{name}.yml"
        self._config_path.write_text(yaml.safe_dump(config))
        self._database_url = database_url
        self._process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.ready = False  # answered /readyz since its last start
        self.log_path = workdir / f"{name}.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKQUEUE_", "DATABASE_"))}
        env.update(
            DATABASE_URL=self._database_url,
            WORKQUEUE_SERVICE_CONFIG=str(self._config_path),
            WORKQUEUE_SERVICE_GITLAB_TOKEN=self._gitlab_token,
            WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=WEBHOOK_SECRET,
            WORKQUEUE_SERVICE_LOCAL_AUTH_USER=LOCAL_USER,
        )
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "workqueue",
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--no-migrate",
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1

    def wait_ready(self, timeout: float = 60) -> float:
        """Seconds until `/readyz` answers 200."""
        started = time.monotonic()
        while True:
            try:
                if httpx.get(f"{self.base_url}/readyz", timeout=2).status_code == 200:
                    self.ready = True
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            if not self.alive:
                raise RuntimeError(f"{self.name} exited: {self.log_tail()}")
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{self.name} not ready after {timeout} s: {self.log_tail()}")
            time.sleep(0.1)

    def kill9(self) -> None:
        self.ready = False
        if self._process is not None and self.alive:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(30)

    def stop(self) -> None:
        self.ready = False
        if self._process is None or not self.alive:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self.kill9()

    def rss_mib(self) -> float | None:
        if self.pid is None:
            return None
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return None

    def metric(self, name: str) -> dict[str, float]:
        """Samples of one metric from `/metrics`, keyed by their label text."""
        text = httpx.get(f"{self.base_url}/metrics", timeout=10).text
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith(name) and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                samples[key[len(name) :]] = float(value)
        return samples

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def tracebacks(self) -> int:
        try:
            return self.log_path.read_text(errors="replace").count("Traceback")
        except OSError:
            return 0


@contextmanager
def replicas(
    count: int, database_url: str, config: dict[str, Any], simulator: GitLabSimulator
) -> Iterator[list[Replica]]:
    workdir = Path(tempfile.mkdtemp(prefix="workqueue-chaos-replicas-"))
    group = [
        Replica(f"replica-{index}", database_url, config, workdir, simulator)
        for index in range(count)
    ]
    try:
        for replica in group:
            replica.start()
        for replica in group:
            replica.wait_ready()
        yield group
    finally:
        for replica in group:
            replica.stop()
        # Set to keep the replicas' logs for a post-mortem of a failed run.
        if os.environ.get("WORKQUEUE_CHAOS_KEEP_LOGS"):
            print(f"replica logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
