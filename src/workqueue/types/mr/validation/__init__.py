"""workqueue.types.mr.validation."""
