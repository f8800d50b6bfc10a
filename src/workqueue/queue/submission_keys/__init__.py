"""workqueue.queue.submission_keys."""
