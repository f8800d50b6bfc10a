"""Where a trunk head comes from, and whether it is still on its branch: GitLab's word only.

A caller's sha and a Push Hook's `after` are claims. Only a commit that is (or
was) on the queue's branch may be built there, because the build runs on the
protected branch with its variables and runners and checks out the sha it is
given. So:

| Who names a head          | What the service does                                     |
|---------------------------|-----------------------------------------------------------|
| a Push Hook (or an SQS    | a hint: read the branch head (one branch GET) and ingest  |
| message of one)           | that; the body's `after` is never used                    |
| a caller (manual ingest)  | the route reads the branch head; any other sha is a 422   |
| the build, before trigger | the sha must be the head or an ancestor of it; otherwise  |
|                           | the head is superseded and nothing is built               |

`place_on_branch` is the pure rule; `read_place` asks GitLab for what it
needs. `PushHeadReads` is the push creator's reader: it runs inside the intake
resolver's transaction, so it reads each queue's branch at most once per
transaction (every delivery claimed by that transaction arrived before the
read began, so one read answers them all) and, after a GitLab failure, leaves
that queue alone for a while (`Backoff`) instead of making every later
delivery wait for a failing call.
"""

from __future__ import annotations

import enum
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, SessionTransaction

from workqueue.gitlab.client import GitLabClient, is_unknown_ancestry
from workqueue.gitlab.errors import PermanentGitLabError, RetryableGitLabError
from workqueue.types.trunk.config import TrunkQueueConfig


class Place(enum.StrEnum):
    """Where a head's sha stands relative to its branch now."""

    HEAD = "head"  # the branch's current head
    ANCESTOR = "ancestor"  # reachable from the head: it landed and newer commits followed
    OFF_BRANCH = "off_branch"  # not reachable: a force-push removed it, or it never landed
    BRANCH_GONE = "branch_gone"  # the branch does not exist any more

    @property
    def on_branch(self) -> bool:
        return self in {Place.HEAD, Place.ANCESTOR}


def place_on_branch(sha: str, head: str | None, merge_base: str | None) -> Place:
    """The rule: `head` is the branch head (None: no branch), `merge_base` GitLab's merge
    base of (sha, head) (None: GitLab knows no common history, or not the sha)."""
    if head is None:
        return Place.BRANCH_GONE
    if sha == head:
        return Place.HEAD
    return Place.ANCESTOR if merge_base == sha else Place.OFF_BRANCH


@dataclass(frozen=True, slots=True)
class BranchPlace:
    place: Place
    head: str | None  # the branch head GitLab reported (None: no branch)

    def describe(self, sha: str, branch: str) -> str:
        """One sentence for the audit trail and the item's completion message."""
        if self.place is Place.BRANCH_GONE:
            return f"{sha} is no longer on {branch}: the branch does not exist"
        if self.place is Place.OFF_BRANCH:
            return f"{sha} is no longer on {branch}: its head {self.head} does not contain it"
        return f"{sha} is on {branch} (head {self.head})"


def read_head(client: GitLabClient, queue: TrunkQueueConfig) -> str | None:
    """The queue's branch head (one branch GET); None when the branch does not exist.
    GitLab errors propagate."""
    branch = client.branch(queue.project, queue.branch)
    return None if branch is None else branch.sha


def read_place(client: GitLabClient, queue: TrunkQueueConfig, sha: str) -> BranchPlace:
    """Where `sha` stands on the queue's branch: one branch GET, plus one merge base when
    the sha is not the head. A sha GitLab does not know is off the branch; other GitLab
    errors propagate."""
    head = read_head(client, queue)
    merge_base: str | None = None
    if head is not None and head != sha:
        try:
            merge_base = client.merge_base(queue.project, [sha, head])
        except PermanentGitLabError as error:
            if not is_unknown_ancestry(error):
                raise
    return BranchPlace(place_on_branch(sha, head, merge_base), head)


@dataclass
class Backoff:
    """Per key: after a failure, leave the key alone for `initial` seconds, doubling up to
    `maximum` while failures repeat; a success forgets the key."""

    initial: float = 1.0
    maximum: float = 60.0
    _state: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (until, delay)

    def ready(self, key: str, now: float) -> bool:
        found = self._state.get(key)
        return found is None or now >= found[0]

    def failed(self, key: str, now: float) -> float:
        """Record a failure at `now`; returns how long the key is now left alone."""
        found = self._state.get(key)
        delay = self.initial if found is None else min(found[1] * 2, self.maximum)
        self._state[key] = (now + delay, delay)
        return delay

    def succeeded(self, key: str) -> None:
        self._state.pop(key, None)


class NoHead(enum.Enum):
    """Why a push hint gave no head to ingest (not a `str`: never mistaken for a sha)."""

    BRANCH_GONE = "branch_gone"  # GitLab says the branch does not exist: nothing to validate
    NOT_NOW = "not_now"  # GitLab failed (now or a moment ago): read again later
    REFUSED = "refused"  # GitLab will not show the project or branch: configuration problem


@dataclass
class _TransactionReads:
    answers: dict[str, str | NoHead] = field(default_factory=dict)  # by queue name
    kept: set[str] = field(default_factory=set)  # queues whose hint was kept for later


class PushHeadReads:
    """The branch reads of the push creator (see the module doc)."""

    def __init__(
        self,
        client: GitLabClient,
        *,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._lock = threading.Lock()
        # What each open transaction has read or kept; gone with the transaction.
        self._transactions: weakref.WeakKeyDictionary[SessionTransaction, _TransactionReads] = (
            weakref.WeakKeyDictionary()
        )

    def head(self, session: Session, queue: TrunkQueueConfig) -> str | NoHead:
        """The queue's branch head as GitLab reports it, read at most once per transaction."""
        reads = self._of(session)
        answer = reads.answers.get(queue.name)
        if answer is None:
            answer = reads.answers[queue.name] = self._read(queue)
        return answer

    def keep_once(self, session: Session, queue: TrunkQueueConfig) -> bool:
        """True the first time this transaction keeps a hint for `queue` for later; one
        kept hint covers every delivery of the transaction."""
        reads = self._of(session)
        if queue.name in reads.kept:
            return False
        reads.kept.add(queue.name)
        return True

    def _of(self, session: Session) -> _TransactionReads:
        if session.get_transaction() is None:
            session.connection()  # begin: the answers belong to the transaction that uses them
        transaction = session.get_transaction()
        if transaction is None:  # pragma: no cover - connection() began one
            return _TransactionReads()
        with self._lock:
            return self._transactions.setdefault(transaction, _TransactionReads())

    def _read(self, queue: TrunkQueueConfig) -> str | NoHead:
        with self._lock:
            if not self._backoff.ready(queue.name, self._clock()):
                return NoHead.NOT_NOW
        try:
            head = read_head(self._client, queue)
        except RetryableGitLabError:
            with self._lock:
                self._backoff.failed(queue.name, self._clock())
            return NoHead.NOT_NOW
        except PermanentGitLabError:
            return NoHead.REFUSED
        with self._lock:
            self._backoff.succeeded(queue.name)
        return NoHead.BRANCH_GONE if head is None else head
