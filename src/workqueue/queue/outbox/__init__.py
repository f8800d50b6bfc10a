"""The outbox: outbound events written in the caller's transaction (`emit`), their table,
SQL and the `notifications:` section. Delivery over HTTP is `workqueue.notifications`."""
