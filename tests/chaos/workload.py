"""The load the scenarios put on the replicas: MR submissions over HTTP, and a CI that
answers every pushed MR head with a green pipeline and tells a replica by webhook.

Everything goes to a randomly chosen replica and is retried on another one when the
answer is a transport error or a 5xx (what a caller or GitLab does), so the load keeps
flowing while replicas die or the database is away. Every answer is recorded: the
invariants are checked against what the service acknowledged.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg
from replicas import WEBHOOK_SECRET, Replica

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec, MergeRequestHead

PROJECT = "chaos/app"
WEBHOOK_PATH = "/api/webhooks/gitlab"
BRANCH_PREFIX = "workqueue/chaos-"
RESEND_PAUSE_SECONDS = 0.2


def create_project(simulator: GitLabSimulator) -> None:
    simulator.create_project(PROJECT, {"README.md": "# chaos\n"})


def submission(index: int, tag: str = "") -> dict[str, Any]:
    """Item `index`: its own branch and its own file, so no two items ever conflict."""
    return {
        "project": PROJECT,
        "source_branch": f"{BRANCH_PREFIX}{tag}{index}",
        "title": f"Chaos change {tag}{index}",
        "commit_message": f"Add file {tag}{index}",
        "file_actions": [
            {"action": "create", "file_path": f"chaos/{tag}{index}.txt", "content": f"{index}\n"}
        ],
    }


@dataclass
class Answers:
    """What the service said, per kind of request (status code or 'transport')."""

    counts: Counter[str] = field(default_factory=Counter)
    slowest_seconds: float = 0.0
    five_xx_without_retry_after: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, kind: str, response: httpx.Response | None, seconds: float) -> None:
        with self.lock:
            self.counts[f"{kind}:{response.status_code if response else 'transport'}"] += 1
            self.slowest_seconds = max(self.slowest_seconds, seconds)
            if (
                response is not None
                and response.status_code >= 500
                and "retry-after" not in response.headers
            ):
                self.five_xx_without_retry_after += 1

    def total(self, suffix: str) -> int:
        with self.lock:
            return sum(n for key, n in self.counts.items() if key.endswith(suffix))


class Sender:
    """Requests to random replicas, retried elsewhere on transport errors and 5xx."""

    def __init__(self, group: list[Replica], rng: random.Random, timeout: float = 15) -> None:
        self.group = group
        self.rng = rng
        self.answers = Answers()
        self._client = httpx.Client(timeout=timeout)
        self._rng_lock = threading.Lock()

    def pick(self) -> Replica:
        with self._rng_lock:
            alive = [replica for replica in self.group if replica.alive] or self.group
            return self.rng.choice(alive)

    def request(
        self, kind: str, method: str, path: str, *, deadline: float = 300, **options: Any
    ) -> httpx.Response:
        give_up = time.monotonic() + deadline
        while True:
            replica = self.pick()
            started = time.monotonic()
            response: httpx.Response | None
            try:
                response = self._client.request(method, replica.base_url + path, **options)
            except httpx.HTTPError:
                response = None
            self.answers.note(kind, response, time.monotonic() - started)
            if response is not None and response.status_code < 500:
                return response
            if time.monotonic() > give_up:
                raise TimeoutError(f"{kind}: no answer below 500 within {deadline} s")
            time.sleep(RESEND_PAUSE_SECONDS)

    def submit(self, body: dict[str, Any], *, deadline: float = 300) -> str:
        """Submit once, as a careful client does: when an answer is lost (a replica died,
        or answered 5xx), the submission may still have been stored, and its item may
        even have finished already. Resending then would open a new generation (DDR-40)
        whose file actions no longer apply, so the sender first asks whether the
        branch has an item before it resends. Every chaos submission has a branch of
        its own, so an item found there is this submission's."""
        give_up = time.monotonic() + deadline
        while True:
            replica = self.pick()
            started = time.monotonic()
            response: httpx.Response | None
            try:
                response = self._client.post(replica.base_url + "/api/work-items/mr", json=body)
            except httpx.HTTPError:
                response = None
            self.answers.note("submit", response, time.monotonic() - started)
            if response is not None and response.status_code < 500:
                assert response.status_code in {200, 201}, response.text
                return str(response.json()["id"])
            if time.monotonic() > give_up:
                raise TimeoutError(f"submit: no answer below 500 within {deadline} s")
            time.sleep(RESEND_PAUSE_SECONDS)
            stored = self.request(
                "lookup",
                "GET",
                "/api/work-items/mr",
                params={"project": body["project"], "source_branch": body["source_branch"]},
                deadline=max(give_up - time.monotonic(), 1),
            )
            assert stored.status_code == 200, stored.text
            if items := stored.json()["items"]:
                return str(items[0]["id"])

    def webhook(self, payload: dict[str, Any], key: str, event: str) -> str:
        """Deliver one hook (GitLab redelivers on failure with the same key); its answer."""
        response = self.request(
            "webhook",
            "POST",
            WEBHOOK_PATH,
            content=httpx.Request("POST", "/", json=payload).content,
            headers={
                "Content-Type": "application/json",
                "X-Gitlab-Event": event,
                "X-Gitlab-Token": WEBHOOK_SECRET,
                "Idempotency-Key": key,
                "X-Gitlab-Event-UUID": key,
            },
        )
        assert response.status_code == 200, response.text
        return str(response.json()["status"])

    def close(self) -> None:
        self._client.close()


@dataclass
class Delivery:
    key: str
    kind: str
    status: str
    item_hint: str  # the source branch the hook is about ('' for none)


class CIRunner:
    """A CI thread: `tick()` every `interval` seconds until stopped; an exception ends
    the thread and is kept in `problems` (the scenario checks it is empty).

    `new_heads()` gives the open MRs whose head sha this CI has not seen yet, from the
    simulator's cheap head listing, so a tick costs next to nothing however many MRs
    have been merged (building every open MR's API entity ten times a second was what
    slowed scenario 5 down as its history grew).
    """

    interval = 0.1

    def __init__(self, simulator: GitLabSimulator, sender: Sender, name: str) -> None:
        self.simulator = simulator
        self.sender = sender
        self.problems: list[BaseException] = []
        self._seen: set[tuple[int, str]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.tick()
                self._stop.wait(self.interval)
        except BaseException as error:
            self.problems.append(error)

    def tick(self) -> None:
        raise NotImplementedError

    def new_heads(self) -> list[MergeRequestHead]:
        fresh = [
            head
            for head in self.simulator.merge_request_heads(PROJECT)
            if (head.iid, head.sha) not in self._seen
        ]
        self._seen.update((head.iid, head.sha) for head in fresh)
        return fresh

    def pipeline_hook(self, pipeline: int) -> tuple[str, str]:
        """Deliver the pipeline's Pipeline Hook to a replica; (idempotency key, answer)."""
        key = str(uuid.uuid4())
        status = self.sender.webhook(self.simulator.pipeline_hook(pipeline), key, "Pipeline Hook")
        return key, status


class GreenCI(CIRunner):
    """Plays GitLab CI and its webhooks: each new MR head gets a green pipeline, and its
    Pipeline Hook goes to a replica (with the MR's source branch remembered)."""

    def __init__(self, simulator: GitLabSimulator, sender: Sender) -> None:
        super().__init__(simulator, sender, "green-ci")
        self.deliveries: list[Delivery] = []

    def tick(self) -> None:
        for head in self.new_heads():
            pipeline = self.simulator.create_pipeline(
                PROJECT, merge_request_iid=head.iid, jobs=[JobSpec("unit-tests", status="success")]
            )
            key, status = self.pipeline_hook(pipeline)
            self.deliveries.append(Delivery(key, "pipeline", status, head.source_branch))


def terminal_count(conninfo: str) -> int:
    with psycopg.connect(conninfo) as connection:
        row = connection.execute(
            "SELECT count(*) FROM work_items WHERE phase <> 'active'"
        ).fetchone()
    return int(row[0]) if row else 0


def all_finished(conninfo: str, item_ids: list[str]) -> bool:
    """Every submitted item has finished and nothing is active any more.

    Counted by id, not by rows: a submission retried after a replica died
    with its answer (it had committed) comes back with an id already in the
    list, or, if that item had already finished, makes a next generation.
    """
    with psycopg.connect(conninfo) as connection:
        row = connection.execute(
            "SELECT count(*) FILTER (WHERE id = ANY(%s::uuid[]) AND phase <> 'active'), "
            "  count(*) FILTER (WHERE phase = 'active') FROM work_items",
            (sorted(set(item_ids)),),
        ).fetchone()
    return row is not None and row[0] == len(set(item_ids)) and row[1] == 0


def wait_for(condition: Any, timeout: float, interval: float = 0.25, explain: Any = None) -> float:
    """Seconds until `condition()` holds; TimeoutError after `timeout` (with `explain()`)."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            why = f": {explain()}" if explain is not None else ""
            raise TimeoutError(f"not reached within {timeout} s{why}")
        time.sleep(interval)
    return time.monotonic() - started
