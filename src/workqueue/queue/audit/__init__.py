"""workqueue.queue.audit."""
