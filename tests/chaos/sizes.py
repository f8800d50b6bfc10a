"""Which size the chaos scenarios run at: `make chaos` sets WORKQUEUE_CHAOS=full."""

from __future__ import annotations

import os

FULL = os.environ.get("WORKQUEUE_CHAOS") == "full"
SEED = int(os.environ.get("WORKQUEUE_CHAOS_SEED", "20261201"))
