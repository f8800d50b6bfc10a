"""Submission idempotency: a caller's `Idempotency-Key` and the answer it got."""
