"""workqueue.api.routes."""
