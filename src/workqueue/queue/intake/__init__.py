"""workqueue.queue.intake."""
