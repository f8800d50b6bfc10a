"""Which project a GitLab delivery names, as GitLab itself knows it.

A body names its project twice, by id (`project.id`, else `project_id`) and by
path (`project.path_with_namespace`); a forged body may make them disagree, so
that one part passes a check and the other reaches the items (API.md "Trust
boundary, round 2"). `ProjectDirectory` asks GitLab, through the service's own
token, and keeps the answers:

* `same_project(id, path)`: GitLab's project for the id has that path, or its
  project for the path has that id (so a project renamed a minute ago is seen
  under its new path although its id is still cached under the old one). When
  GitLab shows neither (a group hook reporting a project the service cannot
  see), the body names nothing the service acts on: they do not contradict
  each other either (`names_one_project`).
* `path_of(id)`: the path a secret's `projects` are matched against when a body
  carries only an id (Job Hooks of some GitLab versions).

It is asked only after the token matched a secret, never for an
unauthenticated request. Answers, found or not found, are kept for
`FOUND_SECONDS` / `NOT_FOUND_SECONDS` in a bounded table, so a burst of
deliveries for one project costs one look-up and a flood of made-up ids costs
one per id, paid from the budget of whoever sent them (`payer`: the secret, or
the SQS consumer; `api.webhook_lookup_budget`): over it, or with the wait for
the look-up threads full, the question is refused (`LookupRefused`) without
asking GitLab, while held answers are still given. Look-ups run on
`LOOKUP_THREADS` threads of their own, so they never take the event loop or the
request threads. A GitLab that cannot answer
(timeout, 5xx, a wrong base URL, the service's token refused) raises
`ProjectLookupUnavailable`: the receiver answers 503 and stores nothing.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from workqueue.gitlab.client import GitLabClient
from workqueue.gitlab.errors import GitLabError, PermanentGitLabError
from workqueue.gitlab.models import ProjectInfo
from workqueue.gitlab.webhook_bodies import hook_project, malformed_project_ids, project_id_conflict
from workqueue.queue.registry import TypeRegistry
from workqueue.receivers.lookup_budget import LookupBudget
from workqueue.types.plugin import InstallContext

logger = logging.getLogger(__name__)

FOUND_SECONDS = 300.0  # as long as the GitLab client keeps a project (PROJECT_CACHE_SECONDS)
NOT_FOUND_SECONDS = 60.0
MAX_ANSWERS = 4096  # oldest answers are forgotten first
# GitLab paths are ASCII letters, digits, `_`, `-`, `.` and `/`; anything else, or
# longer, names no project and is neither asked about nor kept as a key.
_POSSIBLE_PATH = re.compile(r"[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+")
MAX_PATH_CHARACTERS = 2048
LOOKUP_THREADS = 2
LOOKUP_TIMEOUT_SECONDS = 4.0  # well inside GitLab's 10 s wait for the answer
# GitLab answers 404 for a project the token may not see. 401 (a revoked token) and 403
# (a token without `read_api`) refuse every question: taken for "no such project", they
# would let any id and path pass as naming nothing the service can see.
_NOT_SHOWN = frozenset({404})


class ProjectLookupUnavailable(Exception):  # noqa: N818 - a condition, reported as 503
    """GitLab could not say which project an id or path is; try the delivery again later."""


@dataclass(frozen=True, slots=True)
class KnownProject:
    """A project as GitLab answers for it: its numeric id and canonical path."""

    id: int
    path: str


def names_one_project(
    project_id: int, path: str, by_id: KnownProject | None, by_path: KnownProject | None
) -> bool:
    """Whether a body's `project_id` and `path` name one project, given GitLab's project
    for each (None: GitLab shows none). Pure.

    Paths compare exactly: GitLab finds `Team/App` for `team/app`, but a body spelling
    its path otherwise than GitLab does is not GitLab's.
    """
    if by_id is not None and by_id.path == path:
        return True
    if by_path is not None and by_path.id == project_id and by_path.path == path:
        return True
    return by_id is None and by_path is None


Lookup = Callable[[str], ProjectInfo]
"""`GitLabClient.project`: a project by id (decimal) or path; raises GitLabError."""

_Key = tuple[Literal["id", "path"], str]


class _CacheMiss(Exception):  # noqa: N818 - control flow between the two paths
    pass


class ProjectDirectory:
    """GitLab's id ↔ path answers for webhook bodies, cached (see the module doc)."""

    def __init__(
        self,
        lookups: Sequence[Lookup],
        *,
        clock: Callable[[], float] = time.monotonic,
        close: Callable[[], None] | None = None,
    ) -> None:
        """`lookups`: one per GitLab instance the handled types use (usually one)."""
        self._lookups = tuple(lookups)
        self._clock = clock
        self._budget = LookupBudget(clock)
        self._close = close
        self._answers: dict[_Key, tuple[float, tuple[KnownProject | None, ...]]] = {}
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        # Questions being looked up now, by loop and question: a burst of deliveries for
        # one project that is not held yet waits for one look-up, not one each.
        self._asking: dict[tuple[int, tuple[object, ...]], asyncio.Future[Any]] = {}

    @classmethod
    def for_registry(
        cls,
        registry: TypeRegistry,
        context: InstallContext,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> ProjectDirectory:
        """One client per distinct `gitlab_url` of the handled types, with the service's token."""
        urls = dict.fromkeys(
            url
            for registration in registry
            if isinstance(url := getattr(registration.config, "gitlab_url", None), str)
        )
        clients = [_client(url, context) for url in urls] if context.gitlab_token else []
        if len(clients) > 1:
            logger.warning(
                "handled types use %d GitLab instances: a webhook's project id and path "
                "must name one project on at least one of them",
                len(clients),
            )

        def close() -> None:
            for client in clients:
                client.close()

        return cls([client.project for client in clients], clock=clock, close=close)

    def kept_keys(self) -> list[str]:
        """The ids and paths answers are kept for (for tests and debugging)."""
        with self._lock:
            return [reference for _, reference in self._answers]

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if self._close is not None:
            self._close()

    # -- the questions, from a thread (SQS consumer) or the event loop (receiver) --------

    def same_project(self, project_id: int, path: str, *, payer: str | None = None) -> bool:
        """Whether `project_id` and `path` name one project on GitLab (blocking). A
        `payer` pays each GitLab call from its budget (LookupRefused when spent)."""
        return self._same_project(project_id, path, cached_only=False, payer=payer)

    def path_of(self, project_id: int, *, payer: str | None = None) -> str | None:
        """The path of GitLab's project `project_id`; None when GitLab shows none (blocking).
        With several GitLab instances, an id they name differently has no path."""
        return self._path_of(project_id, cached_only=False, payer=payer)

    async def same_project_soon(self, project_id: int, path: str, *, payer: str) -> bool:
        try:
            return self._same_project(project_id, path, cached_only=True, payer=payer)
        except _CacheMiss:
            return bool(
                await self._in_thread(
                    ("same", project_id, path),
                    payer,
                    lambda: self.same_project(project_id, path, payer=payer),
                )
            )

    async def path_of_soon(self, project_id: int, *, payer: str) -> str | None:
        try:
            return self._path_of(project_id, cached_only=True, payer=payer)
        except _CacheMiss:
            path: str | None = await self._in_thread(
                ("path", project_id), payer, lambda: self.path_of(project_id, payer=payer)
            )
            return path

    # -- internals ---------------------------------------------------------------------

    def _same_project(
        self, project_id: int, path: str, *, cached_only: bool, payer: str | None
    ) -> bool:
        by_ids = self._known(("id", str(project_id)), cached_only=cached_only, payer=payer)
        if any(found is not None and found.path == path for found in by_ids):
            return True  # the common case: one answer, usually cached
        if len(path) > MAX_PATH_CHARACTERS or not _POSSIBLE_PATH.fullmatch(path):
            by_paths: tuple[KnownProject | None, ...] = (None,) * len(by_ids)
        else:
            by_paths = self._known(("path", path), cached_only=cached_only, payer=payer)
        return any(
            names_one_project(project_id, path, by_id, by_path)
            for by_id, by_path in zip(by_ids, by_paths, strict=True)
        )

    def _path_of(self, project_id: int, *, cached_only: bool, payer: str | None) -> str | None:
        paths = {
            found.path
            for found in self._known(("id", str(project_id)), cached_only=cached_only, payer=payer)
            if found is not None
        }
        return paths.pop() if len(paths) == 1 else None

    def _known(
        self, key: _Key, *, cached_only: bool, payer: str | None
    ) -> tuple[KnownProject | None, ...]:
        """Each instance's project for `key`, from the table or (not `cached_only`) GitLab,
        each call paid by `payer` (None: by nobody)."""
        now = self._clock()
        with self._lock:
            kept = self._answers.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        if cached_only:
            raise _CacheMiss
        if not self._lookups:
            raise ProjectLookupUnavailable("no GitLab instance is configured to ask")
        answers = tuple(self._ask_paid(lookup, key[1], payer) for lookup in self._lookups)
        lifetime = FOUND_SECONDS if any(answers) else NOT_FOUND_SECONDS
        with self._lock:
            self._answers.pop(key, None)  # re-inserted last: the oldest go first
            self._answers[key] = (self._clock() + lifetime, answers)
            while len(self._answers) > MAX_ANSWERS:
                del self._answers[next(iter(self._answers))]
        return answers

    def _ask_paid(self, lookup: Lookup, reference: str, payer: str | None) -> KnownProject | None:
        if payer is not None:
            self._budget.spend(payer)
        return _ask(lookup, reference)

    async def _in_thread(
        self, asked: tuple[object, ...], payer: str, question: Callable[[], object]
    ) -> Any:
        """The answer to `question`, asked on the look-up threads once the budget admits
        `payer` to the wait; a question already being asked is waited for instead."""
        loop = asyncio.get_running_loop()
        key = (id(loop), asked)
        running = self._asking.get(key)
        if running is None:
            self._budget.admit(payer)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(LOOKUP_THREADS, "workqueue-hook-projects")
            running = loop.run_in_executor(self._executor, question)
            self._asking[key] = running

            def done(_: asyncio.Future[Any]) -> None:
                self._asking.pop(key, None)
                self._budget.leave(payer)

            running.add_done_callback(done)
        # One waiter giving up (its client gone) must not cancel the others' answer.
        return await asyncio.shield(running)


def contradiction(projects: ProjectDirectory, body: Mapping[str, Any], *, payer: str) -> str | None:
    """Why the body's project names are malformed or contradict each other on GitLab, or
    None (blocking; raises ProjectLookupUnavailable, or LookupRefused when `payer`'s
    budget is spent). For deliveries that carry no token (SQS)."""
    malformed = malformed_project_ids(body)
    if malformed:
        return f"{'.'.join(malformed[0])} is not a project id (a positive JSON integer)"
    if project_id_conflict(body):
        return "project.id and project_id are different projects"
    project = hook_project(body)
    if project.id is None or project.path is None:
        return None
    if projects.same_project(project.id, project.path, payer=payer):
        return None
    return (
        f"project.id {project.id} and project.path_with_namespace {project.path} "
        "are different projects on GitLab"
    )


def _ask(lookup: Lookup, reference: str) -> KnownProject | None:
    try:
        info = lookup(reference)
    except PermanentGitLabError as error:
        if error.status in _NOT_SHOWN:
            return None
        raise ProjectLookupUnavailable(str(error)) from None
    except GitLabError as error:
        raise ProjectLookupUnavailable(str(error)) from None
    return KnownProject(info.id, info.path_with_namespace)


def _client(url: str, context: InstallContext) -> GitLabClient:
    token = context.gitlab_token
    assert token is not None  # noqa: S101 - for_registry checked it
    if context.gitlab_client_factory is not None:
        client: GitLabClient = context.gitlab_client_factory(url, token)
        return client
    return GitLabClient(url, token, timeout=LOOKUP_TIMEOUT_SECONDS, on_call=context.gitlab_on_call)
