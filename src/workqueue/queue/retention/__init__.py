"""Retention: finished items lose their contents after `retention.content_days` and are
deleted after the retention period (`contents`, `config`, `repository`)."""
