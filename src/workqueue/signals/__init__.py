"""External checks: builds and releases that outside systems report per commit.

A signal says that check `name`, for component `variant`, is `status` on commit
`sha` of `project`. Signals reach the service by `POST /api/signals`, by
Tekton PipelineRun CloudEvents (`signals/tekton.py`) and over SQS; each is
stored here (the newest per variant by the signal's own time) and then
announced to the item types as a `check_signal` event, which only wakes the
items of that commit: what a check says is always read back from this store,
never from the event.
"""
