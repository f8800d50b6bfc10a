"""Run a ProcessingManager for the `mr` and `agent` types in a child process (crash tests).

Usage: python run_agent_manager.py DATABASE_URL GITLAB_URL AGENT_URL
(the agent's token in WQ_TEST_AGENT_TOKEN)
"""

from __future__ import annotations

import sys
import time

from harness import fast_config
from mr_harness import TOKEN
from sqlalchemy.engine import make_url

from workqueue.db.engine import build_engine, build_sessions
from workqueue.gitlab.client import GitLabClient
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.types.catalog import build_registry
from workqueue.types.plugin import InstallContext


def main() -> None:
    url, gitlab_url, agent_url = make_url(sys.argv[1]), sys.argv[2], sys.argv[3]
    registry = build_registry(
        {
            "mr": {"gitlab_url": gitlab_url},
            "agent": {
                "gitlab_url": gitlab_url,
                "projects": ["group/**"],
                "agent_url": agent_url,
                "agent_token_env": "WQ_TEST_AGENT_TOKEN",
                "retry_initial_seconds": 0.1,
            },
        },
        InstallContext(
            gitlab_token=TOKEN,
            gitlab_client_factory=lambda base, token: GitLabClient(base, token, timeout=30),
        ),
    )
    engine = build_engine(url, pool_size=4)
    manager = ProcessingManager(
        sessions=build_sessions(engine),
        registry=registry,
        config=fast_config(lease_seconds=1.5, heartbeat_seconds=0.5),
        handled_types=["mr", "agent"],
    )
    manager.start()
    time.sleep(600)


if __name__ == "__main__":
    main()
