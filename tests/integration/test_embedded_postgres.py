"""The embedded cluster: first start, reuse, ownership, root handling, crash leftovers."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from workqueue.db.embedded import SERVER_USER, EmbeddedPostgres
from workqueue.db.url import libpq_conninfo

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster_dir() -> Iterator[Path]:
    # Under /tmp, not pytest's 0700 tmp_path: the server user must traverse it.
    directory = Path(tempfile.mkdtemp(prefix="workqueue-embedded-"))
    try:
        yield directory
    finally:
        if (directory / "pgdata" / "postmaster.pid").exists():
            EmbeddedPostgres(directory).stop(mode="immediate")
        shutil.rmtree(directory, ignore_errors=True)


def _postmaster_pid(directory: Path) -> int | None:
    pid_file = directory / "pgdata" / "postmaster.pid"
    if not pid_file.exists():
        return None
    return int(pid_file.read_text().splitlines()[0])


def _alive(pid: int | None) -> bool:
    """Running, and not a zombie waiting for a parent that no longer reaps here."""
    if pid is None:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "zombie" not in state


def _query(url, sql: str):
    with psycopg.connect(libpq_conninfo(url), autocommit=True) as connection:
        return connection.execute(sql).fetchall()


def test_first_start_creates_cluster_and_database_and_stop_stops_it(cluster_dir):
    cluster = EmbeddedPostgres(cluster_dir)
    url = cluster.start()
    assert url.database == "workqueue"
    assert _query(url, "SELECT current_database()") == [("workqueue",)]
    assert "host" in url.query  # unix socket, no TCP port opened
    assert _query(url, "SHOW listen_addresses") == [("",)]
    pid = _postmaster_pid(cluster_dir)
    owner = Path(f"/proc/{pid}").owner()
    expected = SERVER_USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    assert owner == expected
    cluster.stop()
    assert not _alive(pid)


def test_a_second_process_is_a_guest_and_does_not_stop_the_cluster(cluster_dir):
    owner = EmbeddedPostgres(cluster_dir)
    url = owner.start()
    pid = _postmaster_pid(cluster_dir)
    guest = EmbeddedPostgres(cluster_dir)
    assert guest.start() == url
    guest.stop()
    assert _alive(pid)
    owner.stop()
    assert not _alive(pid)


def test_cluster_left_by_a_killed_process_is_reused_with_its_data(cluster_dir):
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        import psycopg
        from workqueue.db.embedded import EmbeddedPostgres
        from workqueue.db.url import libpq_conninfo
        url = EmbeddedPostgres(Path({str(cluster_dir)!r})).start()
        with psycopg.connect(libpq_conninfo(url), autocommit=True) as c:
            c.execute("CREATE TABLE survivor (x int)")
        print("ready", flush=True)
        time.sleep(600)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        pid = _postmaster_pid(cluster_dir)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert _alive(pid)  # the postmaster outlives its parent

    adopter = EmbeddedPostgres(cluster_dir)
    url = adopter.start()
    assert _postmaster_pid(cluster_dir) == pid  # reused, not restarted or re-initialised
    assert _query(url, "SELECT count(*) FROM survivor") == [(0,)]
    adopter.stop()  # the adopter owns it now: it stops it
    assert not _alive(pid)


def test_long_data_dir_paths_get_a_short_socket_directory(cluster_dir):
    deep = cluster_dir / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    cluster = EmbeddedPostgres(deep)
    url = cluster.start()
    try:
        socket_dir = url.query["host"]
        assert isinstance(socket_dir, str)
        assert len(socket_dir) < 90
        assert _query(url, "SELECT 1") == [(1,)]
    finally:
        cluster.stop()


def test_leftovers_of_an_interrupted_first_start_are_replaced(cluster_dir):
    (cluster_dir / "pgdata").mkdir()
    (cluster_dir / "pgdata" / "half-written").write_text("x")
    (cluster_dir / "pgdata.partial").mkdir()
    cluster = EmbeddedPostgres(cluster_dir)
    url = cluster.start()
    try:
        assert _query(url, "SELECT 1") == [(1,)]
        assert not (cluster_dir / "pgdata.partial").exists()
        assert not (cluster_dir / "pgdata" / "half-written").exists()
    finally:
        cluster.stop()


def test_only_the_server_user_can_reach_the_socket(cluster_dir):
    cluster = EmbeddedPostgres(cluster_dir)
    url = cluster.start()
    try:
        socket_dir = Path(str(url.query["host"]))
        assert socket_dir.stat().st_mode & 0o777 == 0o700
    finally:
        cluster.stop()
