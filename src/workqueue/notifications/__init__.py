"""workqueue.notifications."""
