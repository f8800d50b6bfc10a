"""The manager's first start takes the startup heap out of full garbage collections, once."""

from __future__ import annotations

import gc

from workqueue.queue.processing.manager import freeze_startup_heap


def test_the_startup_heap_is_frozen_once_per_process():
    freeze_startup_heap()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    later = [object() for _ in range(1000)]  # created after the first start
    freeze_startup_heap()
    assert gc.get_freeze_count() == frozen
    assert later
