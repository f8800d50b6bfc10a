"""`workqueue-service demo`: the whole service on a throwaway database and a simulated GitLab.

One process holds everything: the GitLab simulator (with a CI runner that
passes every MR head), the embedded PostgreSQL in a temporary directory, and
the service itself — API, engine and dashboard. uvicorn runs on the main
thread, so Ctrl-C and SIGTERM stop the demo exactly as they stop `serve`; the
story (`demo_story.py`) runs beside it and talks to the service over HTTP.
The service's own log goes to a file in the data directory, so the terminal
shows the story only.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import socket
import tempfile
import time
from pathlib import Path

import typer
import uvicorn
from rich.console import Console
from rich.text import Text

from workqueue.api.app import create_app
from workqueue.cli.client_http import DEFAULT_SERVICE_URL
from workqueue.cli.database import (
    ShutdownRequested,
    StartupError,
    check_and_migrate,
    service_database,
)
from workqueue.cli.demo_story import DemoStory
from workqueue.cli.listener import EXIT_CANNOT_LISTEN, ListenError, listen_on
from workqueue.cli.server import build_uvicorn, listener_url, validated_config
from workqueue.settings import Settings
from workqueue.testing.demo_gitlab import PROJECT, PROJECT_FILES, CiRunner
from workqueue.testing.gitlab_simulator import GitLabSimulator

HOST = "127.0.0.1"  # the demo's user has every permission: never reachable from elsewhere
LOCAL_USER = "demo"
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
CONFIG_TEMPLATE = """\
# Written by `workqueue-service demo`: the mr type against the built-in GitLab
# simulator; the local user "{user}" (no token needed) may do everything.
processing:
  workers: 4
handled_types:
  mr:
    gitlab_url: {gitlab_url}
"""


def run_demo(*, keep: bool, port: int) -> None:
    """Run the demo; return normally for exit 0, raise `typer.Exit` otherwise."""
    console = Console(highlight=False)
    started = time.monotonic()
    try:
        listener = listen_on(HOST, port)
    except ListenError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_CANNOT_LISTEN) from None
    data_dir = Path(tempfile.mkdtemp(prefix="workqueue-demo-"))
    demo = _Demo(console, data_dir, keep=keep)
    console.print(Text("workqueue-service demo", style="bold"), "- Ctrl-C stops it")
    console.print(f"  data directory   {data_dir}")
    with listener:
        demo.run(listener)
    _clean_up(console, data_dir, keep=keep or demo.failure is not None)
    if demo.failure is not None:
        typer.echo(
            f"error: the demo failed: {demo.failure} (service log: {demo.log_path})", err=True
        )
        raise typer.Exit(EXIT_FAILED)
    if not demo.finished or (demo.interrupted and not keep):
        typer.echo("demo interrupted before it finished", err=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    elapsed = time.monotonic() - started
    console.print(
        f"demo stopped after {elapsed:.0f} s" if keep else f"demo finished in {elapsed:.1f} s"
    )


class _Demo:
    """One run: simulator, database, service and story, stopped in reverse order."""

    def __init__(self, console: Console, data_dir: Path, *, keep: bool) -> None:
        self.console = console
        self.data_dir = data_dir
        self.keep = keep
        self.log_path = data_dir / "service.log"
        self.failure: str | None = None
        self.interrupted = False
        self.finished = False
        self._gitlab_token = secrets.token_urlsafe(16)
        self._hook_secret = secrets.token_urlsafe(16)

    def run(self, listener: socket.socket) -> None:
        _log_to(self.log_path)
        try:
            with GitLabSimulator(token=self._gitlab_token) as simulator:
                simulator.create_project(PROJECT, PROJECT_FILES)
                self.console.print(f"  simulated GitLab {simulator.url} (project {PROJECT})")
                self._serve(simulator, listener)
        except ShutdownRequested:
            self.interrupted = True
        except StartupError as error:
            self.failure = str(error)

    def _serve(self, simulator: GitLabSimulator, listener: socket.socket) -> None:
        settings = _settings(self.data_dir, simulator.url, self._gitlab_token, self._hook_secret)
        config = validated_config(settings)
        with service_database(settings, self.data_dir / "postgres") as database_url:
            check_and_migrate(database_url, migrate=True)
            try:
                application = create_app(settings, config, database_url=database_url)
            except (RuntimeError, ValueError) as error:
                raise StartupError(str(error)) from None
            server = build_uvicorn(application, listener, "info")
            url = listener_url(listener)
            self.console.print(f"  service          {url} (log: {self.log_path})", soft_wrap=True)
            self.console.print()
            self._run_story_beside(server, simulator, url, listener)

    def _run_story_beside(
        self,
        server: uvicorn.Server,
        simulator: GitLabSimulator,
        url: str,
        listener: socket.socket,
    ) -> None:
        def story_done() -> None:
            self.finished = story.result.finished
            self.failure = story.result.error
            if self.finished:
                _tell_where_to_look(self.console, url, keep=self.keep)
            if not self.keep or not self.finished:
                server.should_exit = True

        story = DemoStory(self.console, url, lambda: bool(server.started), story_done)
        runner = CiRunner(
            simulator, f"{url}/api/webhooks/gitlab", self._hook_secret, story.pipeline_passed
        )
        runner.start()
        story.start()
        try:
            server.run(sockets=[listener])
        finally:
            story.stopping.set()
            runner.stopping.set()
            story.join(10)
            runner.join(10)


def _tell_where_to_look(console: Console, service_url: str, *, keep: bool) -> None:
    console.print()
    console.print(f"dashboard: {service_url}/ui/")
    if keep:
        url_flag = "" if service_url == DEFAULT_SERVICE_URL else f" --url {service_url}"
        console.print(
            f"the service keeps running: try `workqueue-service status{url_flag}` in another "
            "terminal (the CI runner passes every new MR head); Ctrl-C stops it",
            soft_wrap=True,
        )


def _settings(data_dir: Path, gitlab_url: str, gitlab_token: str, hook_secret: str) -> Settings:
    """The demo's own environment; nothing is taken from the caller's (their DATABASE_URL, S3…)."""
    config_path = data_dir / "config.yml"
    config_path.write_text(CONFIG_TEMPLATE.format(user=LOCAL_USER, gitlab_url=gitlab_url))
    return Settings(
        DATABASE_URL=None,
        WORKQUEUE_SERVICE_CONFIG=config_path,
        WORKQUEUE_SERVICE_DATA_DIR=data_dir / "postgres",
        WORKQUEUE_SERVICE_LOCAL_AUTH_USER=LOCAL_USER,
        WORKQUEUE_SERVICE_GITLAB_TOKEN=gitlab_token,
        WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=hook_secret,
        WORKQUEUE_SERVICE_OPENSHIFT_API_URL=None,
        WORKQUEUE_SERVICE_AUDIT_S3_BUCKET=None,
        WORKQUEUE_SERVICE_EVENTS_QUEUE_URL=None,
        SENTRY_DSN=None,
    )


def _log_to(path: Path) -> None:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)


def _clean_up(console: Console, data_dir: Path, *, keep: bool) -> None:
    logging.shutdown()  # the log file lives in the directory
    if keep:
        console.print(
            f"kept the data directory {data_dir} (database, config, service log)", soft_wrap=True
        )
    else:
        shutil.rmtree(data_dir, ignore_errors=True)
