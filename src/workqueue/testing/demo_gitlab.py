"""A simulated GitLab whose CI passes every MR head: what `demo` and the quickstart run against.

    python -m workqueue.testing.demo_gitlab [--port 8929] [--hook-url URL] [--hook-secret S]

The CI runner stands where GitLab's runners would: for every new head of an
open MR it records a passing pipeline and sends GitLab's Pipeline Hook to the
service, as a real GitLab does. Nothing here is for production.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType

import httpx

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

logger = logging.getLogger(__name__)

PROJECT = "demo/widgets"
PROJECT_FILES = {"README.md": "Widgets\n"}
# Well-known values for a local trial: the simulator guards nothing real.
TOKEN = "simulator-token"  # noqa: S105
HOOK_SECRET = "demo-secret"  # noqa: S105
HOOK_URL = "http://127.0.0.1:8080/api/webhooks/gitlab"
POLL_SECONDS = 0.1


class CiRunner(threading.Thread):
    """One passing pipeline per new MR head, announced to the service by Pipeline Hook.

    A hook the service did not take (not started yet, wrong secret) is sent
    again for the same pipeline on the next round: no pipeline is run twice.
    """

    def __init__(
        self,
        simulator: GitLabSimulator,
        hook_url: str,
        hook_secret: str,
        on_pipeline: Callable[[int, int], None],
        project: str = PROJECT,
    ) -> None:
        super().__init__(name="demo-ci-runner", daemon=True)
        self._simulator = simulator
        self._hook_url = hook_url
        self._hook_secret = hook_secret
        self._on_pipeline = on_pipeline
        self._project = project
        self._pipelines: dict[str, int] = {}  # MR head sha -> its pipeline
        self._announced: set[str] = set()
        self._refused: set[str] = set()
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(POLL_SECONDS):
            self.run_once()

    def run_once(self) -> None:
        for merge_request in self._simulator.merge_requests(self._project, state="opened"):
            sha = merge_request["sha"]
            if sha in self._announced:
                continue
            if sha not in self._pipelines:
                self._pipelines[sha] = self._simulator.create_pipeline(
                    self._project,
                    merge_request_iid=merge_request["iid"],
                    jobs=[JobSpec("test", status="success")],
                )
            pipeline = self._pipelines[sha]
            if self._deliver(sha, pipeline):
                self._announced.add(sha)
                self._on_pipeline(merge_request["iid"], pipeline)

    def _deliver(self, sha: str, pipeline: int) -> bool:
        hook = self._simulator.pipeline_hook(pipeline)
        try:
            response = self._simulator.send_webhook(
                self._hook_url, hook, secret_token=self._hook_secret
            )
            response.raise_for_status()
        except httpx.HTTPError as error:
            if sha not in self._refused:  # once per pipeline: the next rounds retry quietly
                self._refused.add(sha)
                logger.warning("Pipeline Hook to %s not taken yet: %s", self._hook_url, error)
            return False
        return True


def _stop_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the same clean stop as Ctrl-C


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m workqueue.testing.demo_gitlab",
        description="A simulated GitLab with project demo/widgets whose CI passes every MR head.",
    )
    parser.add_argument("--port", type=int, default=8929, help="default: %(default)s")
    parser.add_argument("--token", default=TOKEN, help="API token (default: %(default)s)")
    parser.add_argument("--hook-url", default=HOOK_URL, help="default: %(default)s")
    parser.add_argument("--hook-secret", default=HOOK_SECRET, help="default: %(default)s")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per hook is ours to say
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    simulator = GitLabSimulator(token=options.token, port=options.port)
    try:
        simulator.start()
    except OSError as error:
        parser.exit(3, f"error: cannot listen on 127.0.0.1:{options.port}: {error.strerror}\n")
    simulator.create_project(PROJECT, PROJECT_FILES)
    logger.info(
        "simulated GitLab on %s with project %s (token %s); CI passes every MR head "
        "and sends its Pipeline Hook to %s. Ctrl-C stops it.",
        simulator.url,
        PROJECT,
        options.token,
        options.hook_url,
    )

    def announce(iid: int, pipeline: int) -> None:
        logger.info("pipeline %s passed on MR !%s; Pipeline Hook delivered", pipeline, iid)

    runner = CiRunner(simulator, options.hook_url, options.hook_secret, announce)
    try:
        runner.run()
    except KeyboardInterrupt:
        logger.info("stopped")
    finally:
        simulator.stop()


if __name__ == "__main__":
    main()
