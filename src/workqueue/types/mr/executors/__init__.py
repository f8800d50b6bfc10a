"""workqueue.types.mr.executors."""
