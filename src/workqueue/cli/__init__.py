"""The `workqueue-service` command line."""
