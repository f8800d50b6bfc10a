"""The processing engine: find due items, claim them, step them on a bounded pool.

`manager` owns the dispatcher, the worker pool and the heartbeat; `item_loop`
steps one worker's claims, `item_step` one item's part of a step, and
`failures` records what went wrong. The pure plans (`dispatch_plan`,
`give_way`) decide; `lease_repository`, `step_repository` and `sweeps` hold the
SQL."""
