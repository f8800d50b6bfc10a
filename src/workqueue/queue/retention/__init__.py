"""workqueue.queue.retention."""
