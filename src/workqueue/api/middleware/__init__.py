"""workqueue.api.middleware."""
