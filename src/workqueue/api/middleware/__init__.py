"""ASGI middleware that runs around every route, before any route reads the request.

Authentication first, then the one body reader with its limits, strict JSON,
and the answers every response gets on its way out (headers, outages as 503,
422s that can always be sent)."""
