"""Load that keeps coming whatever happens, and a prober that records every single answer.

`SteadySubmitter` submits items at a steady pace through the retrying `Sender` (a caller
that tries again). `Prober` sends one request at a time, never retried, round-robin
over the replicas — a webhook delivery with a fresh key, then a list request — and
keeps each answer: when it started, how long it took, its status and `Retry-After`.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from replicas import WEBHOOK_SECRET, Replica
from workload import WEBHOOK_PATH, Sender, submission

PROBE_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class Probe:
    kind: str  # "webhook" or "list"
    started: float  # time.time()
    seconds: float
    status: int | None  # None: no answer (connection refused, reset, timeout)
    retry_after: str | None
    key: str | None = None
    answer: str | None = None  # the webhook's {"status": ...}


class _Loop:
    def __init__(self, name: str) -> None:
        self.problems: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._guarded, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def _guarded(self) -> None:
        try:
            while not self._stop.is_set():
                self.step()
        except BaseException as error:
            self.problems.append(error)

    def step(self) -> None:
        raise NotImplementedError


class SteadySubmitter(_Loop):
    def __init__(self, sender: Sender, per_second: float, tag: str = "s") -> None:
        super().__init__("steady-submitter")
        self.sender = sender
        self.item_ids: list[str] = []
        self._pause = 1 / per_second
        self._tag = tag

    def step(self) -> None:
        self.item_ids.append(self.sender.submit(submission(len(self.item_ids), self._tag)))
        self._stop.wait(self._pause)


class Prober(_Loop):
    def __init__(self, group: list[Replica], hook: dict[str, Any], pause: float = 0.05) -> None:
        super().__init__("prober")
        self.group = group
        self.probes: list[Probe] = []
        self._hook = hook
        self._pause = pause
        self._turn = 0
        self._client = httpx.Client(timeout=PROBE_TIMEOUT_SECONDS)

    def stop(self) -> None:
        super().stop()
        self._client.close()

    def step(self) -> None:
        replica = self.group[self._turn % len(self.group)]
        kind = "webhook" if self._turn % 2 == 0 else "list"
        self._turn += 1
        key = str(uuid.uuid4()) if kind == "webhook" else None
        started, clock = time.time(), time.monotonic()
        try:
            if kind == "webhook":
                response = self._client.post(
                    replica.base_url + WEBHOOK_PATH,
                    json=self._hook,
                    headers={
                        "X-Gitlab-Event": "Pipeline Hook",
                        "X-Gitlab-Token": WEBHOOK_SECRET,
                        "Idempotency-Key": str(key),
                    },
                )
            else:
                response = self._client.get(replica.base_url + "/api/work-items?limit=5")
        except httpx.HTTPError:
            response = None
        answer = None
        if response is not None and kind == "webhook" and response.status_code == 200:
            answer = str(response.json()["status"])
        self.probes.append(
            Probe(
                kind=kind,
                started=started,
                seconds=time.monotonic() - clock,
                status=response.status_code if response is not None else None,
                retry_after=response.headers.get("retry-after") if response is not None else None,
                key=key,
                answer=answer,
            )
        )
        self._stop.wait(self._pause)
