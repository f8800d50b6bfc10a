"""`POST /api/webhooks/gitlab`: the GitLab webhook receiver and its parts.

`route` authenticates and stores a delivery; `secrets` and `config` say which
`X-Gitlab-Token` may speak for which projects; `batcher` stores concurrent
deliveries in one transaction. What it shares with the SQS receiver is in
`workqueue.receivers`."""
