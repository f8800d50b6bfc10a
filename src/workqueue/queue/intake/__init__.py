"""The delivery intake: receivers store deliveries, a resolver turns them into events.

`deliveries` stores and resolves; `resolver` is the thread behind the receivers;
`pending_events` resolves events to the items they concern and stores them;
`repository` and `received_repository` hold the SQL (the intake table, and the
de-duplication of delivery keys)."""
