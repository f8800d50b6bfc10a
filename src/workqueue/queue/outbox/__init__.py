"""workqueue.queue.outbox."""
