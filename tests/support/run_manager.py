"""Run a ProcessingManager over the sample type in a child process (crash tests).

Usage: python run_manager.py DATABASE_URL MARKER_FILE
The `step` action writes MARKER_FILE and then blocks, so the parent can
SIGKILL this process in the middle of an action.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from harness import fast_config
from sample_type import Behaviour, build_registry
from sqlalchemy.engine import make_url

from workqueue.db.engine import build_engine, build_sessions
from workqueue.queue.processing.manager import ProcessingManager


def main() -> None:
    url, marker = make_url(sys.argv[1]), Path(sys.argv[2])
    behaviour = Behaviour(block=threading.Event(), worker_name="doomed")
    engine = build_engine(url, pool_size=4)
    manager = ProcessingManager(
        sessions=build_sessions(engine),
        registry=build_registry(behaviour),
        config=fast_config(lease_seconds=1.5, heartbeat_seconds=0.5),
        handled_types=["sample"],
    )
    manager.start()
    behaviour.started.wait(30)
    marker.write_text("in the middle of an action\n")
    time.sleep(600)


if __name__ == "__main__":
    main()
