"""The install checks leave a plain `pytest` (and `make test`) unless asked for.

Each one builds a fresh venv and downloads its packages: minutes in all, and the
package index must be reachable. `make check-installs` (run by .ci/run) sets
WORKQUEUE_INSTALL_CHECKS=1.
"""

from __future__ import annotations

import os

import pytest

REQUESTED = os.environ.get("WORKQUEUE_INSTALL_CHECKS") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if REQUESTED:
        return
    dropped = [item for item in items if item.get_closest_marker("installs")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]
