"""Run a ProcessingManager for the `trunk` type in a child process (crash tests).

Usage: python run_trunk_manager.py DATABASE_URL GITLAB_URL
"""

from __future__ import annotations

import sys
import time

from harness import fast_config
from sqlalchemy.engine import make_url
from trunk_harness import trunk_registry

from workqueue.db.engine import build_engine, build_sessions
from workqueue.queue.processing.manager import ProcessingManager


def main() -> None:
    url, gitlab_url = make_url(sys.argv[1]), sys.argv[2]
    registry = trunk_registry(gitlab_url)
    engine = build_engine(url, pool_size=4)
    manager = ProcessingManager(
        sessions=build_sessions(engine),
        registry=registry,
        config=fast_config(lease_seconds=1.5, heartbeat_seconds=0.5),
        handled_types=["trunk"],
    )
    manager.start()
    time.sleep(600)


if __name__ == "__main__":
    main()
