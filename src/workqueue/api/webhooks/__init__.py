"""workqueue.api.webhooks."""
