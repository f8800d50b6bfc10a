"""Outbound notifications: outbox rows delivered over HTTP to subscribers (Standard Webhooks).

The engine only writes the outbox (`queue.outbox.emit`, in the caller's
transaction); the HTTP client that delivers lives here, outside the engine."""
