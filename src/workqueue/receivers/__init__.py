"""workqueue.receivers."""
