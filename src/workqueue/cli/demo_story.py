"""What `workqueue-service demo` shows: three submissions told as they happen.

The story talks to the service over HTTP only, as any caller would; the CI
runner (`testing.demo_gitlab`) stands next to the simulated GitLab and
announces each pipeline with a Pipeline Hook, as a real GitLab does.
Progress is a live rich table on a terminal; the milestones are also printed
as plain lines, so a log or a pipe gets the same story.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import httpx
from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from workqueue.cli.client_render import merge_blocker_text, phase_text
from workqueue.testing.demo_gitlab import PROJECT

MR_ITEMS = "/api/work-items/mr"
POLL_SECONDS = 0.1
STEP_TIMEOUT_SECONDS = 30.0
STARTUP_TIMEOUT_SECONDS = 60.0


class DemoFailedError(Exception):
    """A step did not end as the story expects (the message says which and how)."""


class DemoStoppedError(Exception):
    """The service is stopping (Ctrl-C): the story ends where it is."""


def sample_submissions() -> tuple[dict[str, Any], dict[str, Any]]:
    """The merged MR and the held-back MR (`auto_merge` off), as a caller sends them."""
    merged = {
        "project": PROJECT,
        "source_branch": "workqueue/greeting",
        "title": "Add a greeting",
        "commit_message": "Add hello.txt",
        "file_actions": [{"action": "create", "file_path": "hello.txt", "content": "Hello!\n"}],
    }
    held_back = {
        "project": PROJECT,
        "source_branch": "workqueue/held-back",
        "title": "Describe the widgets",
        "commit_message": "Expand the README",
        "auto_merge": False,
        "file_actions": [
            {"action": "update", "file_path": "README.md", "content": "Widgets, to order.\n"}
        ],
    }
    return merged, held_back


@dataclass
class _Row:
    """One submission as the progress table shows it."""

    label: str
    item: Mapping[str, Any] = field(default_factory=dict)


class Progress:
    """The live table of the demo's items plus milestone lines above it."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._rows: list[_Row] = []
        self._lock = threading.Lock()
        self._live = Live(self._table(), console=console, auto_refresh=False)

    def __enter__(self) -> Self:
        self._live.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._live.update(self._table(), refresh=True)
        self._live.stop()
        self.console.print()

    def add(self, label: str) -> _Row:
        with self._lock:
            row = _Row(label)
            self._rows.append(row)
            return row

    def update(self, row: _Row, item: Mapping[str, Any]) -> None:
        with self._lock:
            row.item = item
            self._live.update(self._table(), refresh=True)

    def say(self, message: str, style: str = "") -> None:
        with self._lock:
            self._live.console.print(Text(message, style=style), soft_wrap=True)

    def _table(self) -> Table:
        table = Table(title="demo items", title_justify="left", box=box.SIMPLE_HEAD)
        for heading in ("source branch", "phase", "MR", "pipeline", "merge blocker"):
            table.add_column(heading, no_wrap=True, min_width=len(heading))
        for row in self._rows:
            details = row.item.get("details") or {}
            iid = details.get("mr_iid")
            blocker = details.get("merge_blocker")
            table.add_row(
                Text(row.label),
                phase_text(row.item.get("phase", "")),
                Text(f"!{iid}" if iid is not None else ""),
                Text(str(details.get("head_pipeline_status") or "")),
                Text(str(blocker.get("code", ""))) if isinstance(blocker, dict) else Text(""),
            )
        return table


@dataclass
class StoryResult:
    finished: bool = False
    error: str | None = None


class DemoStory(threading.Thread):
    """The three submissions, one after the other, against the running service."""

    def __init__(
        self,
        console: Console,
        service_url: str,
        is_serving: Callable[[], bool],
        on_done: Callable[[], None],
    ) -> None:
        super().__init__(name="demo-story", daemon=True)
        self._console = console
        self._service_url = service_url
        self._is_serving = is_serving
        self._on_done = on_done
        self.stopping = threading.Event()
        self.result = StoryResult()
        self._progress: Progress | None = None

    def pipeline_passed(self, iid: int, pipeline: int) -> None:
        """Called by the CI runner once the service accepted the Pipeline Hook."""
        if self._progress is not None:
            self._progress.say(
                f"  GitLab: MR !{iid} opened by the service; CI pipeline {pipeline} passed "
                "on its head (Pipeline Hook sent)"
            )

    def run(self) -> None:
        try:
            self._wait_for_service()
            with (
                httpx.Client(base_url=self._service_url, timeout=10) as client,
                Progress(self._console) as progress,
            ):
                self._progress = progress
                self._tell(client, progress)
            self.result.finished = True
        except DemoStoppedError:
            pass
        except (DemoFailedError, httpx.HTTPError) as error:
            self.result.error = str(error) or type(error).__name__
        finally:
            self._on_done()

    def _wait_for_service(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while not self._is_serving():
            if self.stopping.wait(POLL_SECONDS):
                raise DemoStoppedError
            if time.monotonic() > deadline:
                raise DemoFailedError("the service did not start within a minute")

    def _tell(self, client: httpx.Client, progress: Progress) -> None:
        merged_body, held_body = sample_submissions()

        progress.say("1. an MR the service merges once its pipeline passes", "bold")
        started = time.monotonic()
        row = progress.add("workqueue/greeting")
        item = self._submit(client, merged_body, expect="created")
        progress.say(f"  submitted workqueue/greeting: item {item['id']} created")
        item = self._follow(client, progress, row, item, lambda seen: seen["phase"] != "active")
        details = item.get("details") or {}
        if item["phase"] != "completed":
            raise DemoFailedError(
                f"workqueue/greeting ended {item['phase']}: {item.get('error') or 'no error given'}"
            )
        progress.say(
            f"  merged MR !{details.get('mr_iid')}: item completed "
            f"({details.get('completion_reason')}) {time.monotonic() - started:.1f} s "
            f"after submission ({details.get('mr_url')})",
            "green",
        )

        progress.say("2. an MR held back for a person: auto_merge is off", "bold")
        row = progress.add("workqueue/held-back")
        item = self._submit(client, held_body, expect="created")
        progress.say(f"  submitted workqueue/held-back: item {item['id']} created")
        item = self._follow(client, progress, row, item, _held_back_after_green_pipeline)
        details = item.get("details") or {}
        blocker = merge_blocker_text(details["merge_blocker"])
        progress.say(
            f"  held back: MR !{details.get('mr_iid')} stays open, pipeline "
            f"{details.get('head_pipeline_status')}, merge_blocker {blocker.plain}",
            "yellow",
        )

        progress.say("3. the same submission again: nothing to do", "bold")
        again = self._submit(client, held_body, expect="unchanged")
        progress.say(
            f"  resubmitted workqueue/held-back: outcome unchanged (item {again['id']}, "
            f"generation {again.get('generation')}, no new commit)",
            "green",
        )

    def _submit(self, client: httpx.Client, body: Mapping[str, Any], expect: str) -> dict[str, Any]:
        response = client.post(MR_ITEMS, json=body)
        if response.is_error:
            raise DemoFailedError(f"submit answered {response.status_code}: {response.text}")
        answer: dict[str, Any] = response.json()
        if answer.get("outcome") != expect:
            raise DemoFailedError(f"submit answered {answer.get('outcome')}, not {expect}")
        return answer

    def _follow(
        self,
        client: httpx.Client,
        progress: Progress,
        row: _Row,
        item: Mapping[str, Any],
        done: Callable[[Mapping[str, Any]], bool],
    ) -> dict[str, Any]:
        """Look at the item until `done`."""
        deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
        while True:
            response = client.get(f"/api/work-items/{item['id']}")
            response.raise_for_status()
            current: dict[str, Any] = response.json()
            progress.update(row, current)
            details = current.get("details") or {}
            if done(current):
                return current
            if time.monotonic() > deadline:
                raise DemoFailedError(
                    f"{details.get('source_branch')} did not get there in "
                    f"{STEP_TIMEOUT_SECONDS:.0f} s (phase {current.get('phase')})"
                )
            if self.stopping.wait(POLL_SECONDS):
                raise DemoStoppedError


def _held_back_after_green_pipeline(item: Mapping[str, Any]) -> bool:
    if item.get("phase") != "active":
        raise DemoFailedError(f"workqueue/held-back ended {item.get('phase')}; it should wait")
    details = item.get("details") or {}
    blocker = details.get("merge_blocker")
    return (
        details.get("head_pipeline_status") == "success"
        and isinstance(blocker, dict)
        and blocker.get("code") == "auto_merge_disabled"
    )
