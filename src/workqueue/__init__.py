"""workqueue-service: a durable work queue between untrusted callers and GitLab."""

__version__ = "0.1.0"
