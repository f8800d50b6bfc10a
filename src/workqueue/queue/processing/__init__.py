"""workqueue.queue.processing."""
