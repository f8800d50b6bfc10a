"""The attention reconciler: a quiet, scoped worker that keeps queue memberships.

Lifecycle (see docs/explanation/architecture.md, "Attention queues"):

* producers — the engine after each committed step and the API's changes
  (`item_changed`: that item of that project), rule changes and listener
  (re)connections (`apply_rules`, `wake_all`: whole scopes) — wake only
  their scope; other replicas hear of it through NOTIFY;
* a pass claims its scope with a transaction advisory lock (two replicas
  never reconcile one scope at once) and reads at most `page_size` items:
  the changed items by id, or, in a whole cycle, the items after the
  cycle's cursor up to its fixed upper id; it re-checks and writes each
  item that needs a change under its lock;
* `ScopeBoard` decides what runs when: continuation after 1 s while pages or
  newer signals remain, backoff 1 s → 60 s for a failing scope;
* reconciled, a scope is forgotten: the thread sleeps with no timer and the
  replica sends no SQL until the next signal.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from workqueue.attention import repository, writer
from workqueue.attention.config import QueueRule
from workqueue.attention.details import DetailReaders, DetailsReader
from workqueue.attention.scopes import Clock, MonotonicClock, Scope, ScopeBoard
from workqueue.db.transactions import run_in_transaction
from workqueue.queue.audit.log import AuditLog
from workqueue.queue.background import BackgroundService, Backoff
from workqueue.queue.listener import ChannelListener
from workqueue.queue.registry import TypeRegistry

logger = logging.getLogger(__name__)

CHANNEL = "workqueue_attention"
PAGE_SIZE = 100
# Other replicas hear of changed items at most this often: a busy engine
# commits a step every few milliseconds, and each NOTIFY is a transaction,
# while a replica's passes over one scope are a second apart anyway.
SIGNAL_INTERVAL_SECONDS = 0.2
# A NOTIFY payload must be shorter than 8000 bytes; item ids take 33 each.
SIGNAL_PAYLOAD_BYTES = 7900
# Scope claims use the two-key advisory lock space, apart from the engine's
# one-key item locks; the first key says "attention scope".
_SCOPE_LOCK_CLASS = 0x4154


def scope_lock_key(scope: Scope) -> int:
    digest = hashlib.sha256(b"\0" if scope is None else b"p" + scope.encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def encode_scope(scope: Scope) -> str:
    return "n" if scope is None else f"p{scope}"


def decode_scope(text: str) -> Scope:
    return None if text == "n" else text[1:]


class AttentionReconciler(BackgroundService):
    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        registry: TypeRegistry,
        rules: Sequence[QueueRule],
        audit: AuditLog | None = None,
        clock: Clock | None = None,
        listen_conninfo: str | None = None,
        page_size: int = PAGE_SIZE,
        continuation_seconds: float = 1.0,
        backoff_initial_seconds: float = 1.0,
        backoff_max_seconds: float = 60.0,
        detail_readers: Mapping[str, DetailsReader] | None = None,
        before_page: Callable[[Scope], None] | None = None,
        before_row: Callable[[uuid.UUID], None] | None = None,
    ) -> None:
        self._sessions = sessions
        self._rules = list(rules)
        self._audit = audit or AuditLog()
        self._clock = clock or MonotonicClock()
        self._page_size = page_size
        self.readers = DetailReaders.from_registry(registry, detail_readers)
        self.board = ScopeBoard(
            self._clock,
            continuation_seconds=continuation_seconds,
            backoff_initial_seconds=backoff_initial_seconds,
            backoff_max_seconds=backoff_max_seconds,
        )
        # Test seams: raise to make a page or a row fail.
        self.before_page = before_page
        self.before_row = before_row
        self.replica = uuid.uuid4().hex[:12]
        self._outgoing: dict[Scope, set[uuid.UUID]] = {}
        self._signals_sent_at: float | None = None
        self._outgoing_lock = threading.Lock()
        self.listening = threading.Event()  # set once LISTEN is in effect
        super().__init__(
            thread_name="workqueue-attention",
            listener=(
                ChannelListener(
                    listen_conninfo,
                    channel=CHANNEL,
                    on_notify=self._on_notify,
                    on_connected=self._on_listener_connected,
                    thread_name="attention-listen",
                    description="attention listener",
                )
                if listen_conninfo
                else None
            ),
            # run_due contains its failures; this only keeps a bug from spinning.
            backoff=Backoff(initial=1.0, maximum=1.0),
        )

    # -- producers -------------------------------------------------------------

    def item_changed(self, item_id: uuid.UUID, project: str | None) -> None:
        """An item's change committed (engine or API): it owes a look, here and elsewhere.

        Other replicas look too: if this one dies before its pass, the change is
        still served.
        """
        self.board.signal_items(project, (item_id,))
        if self._listener is not None:
            with self._outgoing_lock:
                self._outgoing.setdefault(project, set()).add(item_id)
        self._wake.set()

    def signal(self, scope: Scope) -> None:
        self.board.signal(scope)
        self._wake.set()

    def apply_rules(self, rules: Sequence[QueueRule] | None = None, *, wake: bool = True) -> None:
        """Store the rules (config load or reload); every scope is owed a cycle after a change."""
        if rules is not None:
            self._rules = list(rules)
        run_in_transaction(self._sessions, lambda s: repository.sync_queues(s, self._rules))
        if wake:
            self.wake_all()

    def wake_all(self) -> None:
        """Startup and rule changes: every project with items is reconstructed."""
        with self._sessions() as session:
            scopes = repository.all_scopes(session)
        for scope in scopes:
            self.board.signal(scope)
        self._wake.set()

    # -- running ----------------------------------------------------------------

    def start(self) -> None:
        """Sync the rules, wake every scope (startup reconstruction), run in a thread.

        With a listener, the wake-up follows each (re)connection instead: a
        change committed elsewhere before LISTEN took effect is then still seen.
        """
        self.apply_rules(wake=self._listener is None)
        super().start()

    def after_stop(self, ended: bool, _timeout: float, /) -> None:
        """Stopped between rows (a transaction in flight commits what it did): send what
        the signal interval held back."""
        if ended:
            self._send_signals(at_once=True)

    def seconds_until_next_round(self) -> float | None:
        moments = (self.board.next_due_at(), self._signals_due_at())
        wake_at = [at for at in moments if at is not None]
        return max(min(wake_at) - self._clock.now(), 0.0) if wake_at else None

    def run_round(self) -> None:
        self.run_due()

    def run_due(self) -> int:
        """One pass for each scope that is due now; returns the number of passes."""
        self._send_signals()
        passes = 0
        for scope in self.board.due():
            if self._stopping.is_set():
                break
            self.run_pass(scope)
            passes += 1
        return passes

    def run_pass(self, scope: Scope) -> None:
        if self.board.owes_whole_cycle(scope):
            self._cycle_pass(scope)
        else:
            self._items_pass(scope)

    def _cycle_pass(self, scope: Scope) -> None:
        """The next page of the scope's whole cycle."""
        cycle = self.board.begin(scope)
        entries = []
        try:
            with self._sessions() as session:
                if not _claim_scope(session, scope):
                    session.rollback()
                    self.board.busy(scope)
                    return
                if self.before_page is not None:
                    self.before_page(scope)
                if not cycle.upper_known:
                    cycle.upper = repository.scope_upper_id(session, scope)
                    cycle.upper_known = True
                rows = []
                if cycle.upper is not None:
                    rows = repository.scope_page(
                        session,
                        scope,
                        after=cycle.cursor,
                        upper=cycle.upper,
                        limit=self._page_size + 1,
                    )
                complete = len(rows) <= self._page_size
                rows = rows[: self._page_size]
                outcome = self._write_page(session, rows)
                session.commit()
                entries = outcome.audit
        except Exception as error:
            logger.warning("attention: pass over %r failed: %s", scope, error)
            self.board.pass_failed(scope)
            return
        self._audit.write_all(entries)
        if outcome.stopped:
            return  # shutdown: the rest of the page is found again at startup
        if rows:
            cycle.cursor = rows[-1].id
        self.board.page_done(
            scope, rows=len(rows), row_failures=len(outcome.failed), complete=complete
        )

    def _items_pass(self, scope: Scope) -> None:
        """A page of the items of the scope that changed."""
        item_ids = self.board.take_items(scope, self._page_size)
        try:
            with self._sessions() as session:
                if not _claim_scope(session, scope):
                    session.rollback()
                    self.board.return_items(scope, item_ids)
                    self.board.busy(scope)
                    return
                if self.before_page is not None:
                    self.before_page(scope)
                rows = repository.item_rows(session, item_ids) if item_ids else []
                outcome = self._write_page(session, sorted(rows, key=lambda row: row.id))
                session.commit()
        except Exception as error:
            logger.warning("attention: pass over %r failed: %s", scope, error)
            self.board.return_items(scope, item_ids)
            self.board.pass_failed(scope)
            return
        self._audit.write_all(outcome.audit)
        if outcome.stopped:
            return  # shutdown: whatever these items owe is found again at startup
        self.board.items_done(scope, rows=len(rows), failed=outcome.failed)

    def _write_page(self, session: Session, rows: list[repository.ItemRow]) -> writer.RowsOutcome:
        queues = [queue for queue in repository.served_queues(session) if queue.enabled]
        if not rows or not queues:
            return writer.RowsOutcome()
        facts = writer.load_facts(session, self.readers, queues, rows)
        memberships = repository.memberships_of_items(session, [row.id for row in rows])
        owed = [item.id for item in facts if writer.plan(queues, item, memberships)]
        if not owed:
            return writer.RowsOutcome()
        return writer.reconcile_items(
            session,
            self.readers,
            [queue.id for queue in queues],
            owed,
            should_stop=self._stopping.is_set,
            check_row=self.before_row,
        )

    # -- other replicas ---------------------------------------------------------

    def _signals_due_at(self) -> float | None:
        """When the waiting outgoing signals may be sent; None when there are none."""
        with self._outgoing_lock:
            if not self._outgoing:
                return None
        sent_at = self._signals_sent_at
        return self._clock.now() if sent_at is None else sent_at + SIGNAL_INTERVAL_SECONDS

    def _send_signals(self, *, at_once: bool = False) -> None:
        now = self._clock.now()
        sent_at = self._signals_sent_at
        if not at_once and sent_at is not None and now - sent_at < SIGNAL_INTERVAL_SECONDS:
            return  # held for the interval (seconds_until_next_round), coalescing meanwhile
        with self._outgoing_lock:
            changed, self._outgoing = self._outgoing, {}
        if not changed:
            return
        self._signals_sent_at = now
        payloads = [
            payload
            for scope, item_ids in changed.items()
            for payload in self._payloads(scope, sorted(item_ids))
        ]
        try:
            with self._sessions() as session:
                session.execute(
                    sa.text(
                        "SELECT pg_notify(:channel, payload) "
                        "FROM unnest(CAST(:payloads AS text[])) AS payload"
                    ),
                    {"channel": CHANNEL, "payloads": payloads},
                )
                session.commit()
        except Exception as error:
            # The scope is served here anyway; other replicas catch up on their
            # listener's next (re)connection.
            logger.warning("attention: could not tell other replicas: %s", error)

    def _payloads(self, scope: Scope, item_ids: Sequence[uuid.UUID]) -> list[str]:
        """`<replica>|<ids>|<scope>` payloads naming `item_ids`, each under the size limit.

        A scope too long to leave room for one id (a project path of thousands of
        bytes) is not sent: the other replicas learn of it at their next
        reconnection, and this replica serves it meanwhile.
        """
        suffix = f"|{encode_scope(scope)}"
        room = SIGNAL_PAYLOAD_BYTES - len(self.replica) - 1 - len(suffix.encode())
        per_payload = (room + 1) // 33  # 32 hex digits and a comma each, but the last
        if per_payload < 1:
            logger.warning("attention: a project path too long to signal: %r…", suffix[:80])
            return []
        return [
            f"{self.replica}|{','.join(item_id.hex for item_id in chunk)}{suffix}"
            for chunk in _chunks(item_ids, per_payload)
        ]

    def _on_notify(self, payload: str) -> None:
        """`<replica>|<item ids>|<scope>` (items changed), or `<replica>|<scope>` (anything
        in the scope may have: what replicas of earlier versions send)."""
        sender, _, rest = payload.partition("|")
        if sender == self.replica or not rest:
            return
        ids, separator, scope = rest.partition("|")
        if not separator:
            self.signal(decode_scope(rest))
            return
        try:
            item_ids = [uuid.UUID(hex=text) for text in ids.split(",")]
        except ValueError:
            logger.warning("attention: ignoring a malformed signal %r", payload[:200])
            return
        self.board.signal_items(decode_scope(scope), item_ids)
        self._wake.set()

    def _on_listener_connected(self) -> None:
        # Signals sent while we were not listening were lost: catch up.
        try:
            self.wake_all()
        except Exception as error:
            logger.warning("attention: could not wake all scopes: %s", error)
        self.listening.set()


def _chunks(values: Sequence[uuid.UUID], size: int) -> list[Sequence[uuid.UUID]]:
    return [values[start : start + size] for start in range(0, len(values), size)]


def _claim_scope(session: Session, scope: Scope) -> bool:
    """Held until the pass's transaction ends; False when another replica holds the scope."""
    claimed: bool = session.execute(
        sa.text("SELECT pg_try_advisory_xact_lock(:class_key, :scope_key)"),
        {"class_key": _SCOPE_LOCK_CLASS, "scope_key": scope_lock_key(scope)},
    ).scalar_one()
    return claimed
