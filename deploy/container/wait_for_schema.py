"""Wait until the database schema is at the revision this build needs, then exit 0.

Runs as the init container of every replica (deploy/kubernetes/base). The
migration Job applies migrations; replicas start with `serve --no-migrate`,
so they never race on Alembic. Without this wait, a replica of a new version
started by the same `kubectl apply` as the Job would process items against
the old schema until the Job finished. Exit 1 when `--timeout` passes first
(the pod then restarts it with back-off, and says why in its log).

Shipped in the image as /opt/workqueue/libexec/wait_for_schema.py; it uses only
the service's own modules, so it agrees with `/readyz` on what "ready" means.
"""

# ruff: noqa: INP001 - a script copied into the image, not part of a package

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TextIO

from sqlalchemy.exc import SQLAlchemyError

from workqueue.db.engine import build_engine
from workqueue.db.migrate import current_revision, head_revision
from workqueue.db.url import mask_password, normalize_database_url


def _say(line: str, stream: TextIO = sys.stdout) -> None:
    stream.write(line + "\n")
    stream.flush()  # the pod's log shows progress while it waits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600, help="seconds (default 600)")
    parser.add_argument("--interval", type=float, default=5, help="seconds between checks")
    options = parser.parse_args(argv)
    raw_url = os.environ.get("DATABASE_URL")
    if not raw_url:
        _say("error: DATABASE_URL is not set", sys.stderr)
        return 2
    url = normalize_database_url(raw_url)
    needed = head_revision()
    engine = build_engine(url, pool_size=1)
    deadline = time.monotonic() + options.timeout
    try:
        while True:
            try:
                with engine.connect() as connection:
                    found: str | None = current_revision(connection)
                state = f"schema at {found}"
            except SQLAlchemyError as error:
                found = None
                reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
                state = f"database at {mask_password(url)} unreachable: {reason}"
            if found == needed:
                _say(f"schema is at {needed}")
                return 0
            if time.monotonic() >= deadline:
                _say(f"error: gave up waiting: {state}, this build needs {needed}")
                return 1
            _say(f"waiting for the migration Job: {state}, this build needs {needed}")
            time.sleep(options.interval)
    finally:
        engine.dispose()


if __name__ == "__main__":
    sys.exit(main())
