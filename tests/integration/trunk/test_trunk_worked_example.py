"""The seed's worked example over real webhooks: heads A…F land, max_concurrent 1.

A, D and F are validated; B, C and E are superseded without a build; the slot
count is checked at every step and last green moves A → D → F. Every hook is
then delivered again (same key: duplicate; new key: a no-op, since the head it
makes the service read is known) at every state.
"""

from __future__ import annotations

from harness import wait_until
from trunk_harness import (
    building,
    deliver,
    finish_pipeline,
    head,
    heads,
    in_flight,
    land,
    push_hook,
    queue_row,
    state_is,
    trunk_app,
)


def test_heads_a_to_f_validate_a_d_f_and_supersede_b_c_e(  # noqa: PLR0915 - one story
    database_url, sessions, simulator
):
    delivered: list[tuple[dict, str]] = []

    def send(payload: dict) -> str:
        key = f"delivery-{len(delivered)}"
        delivered.append((payload, key))
        return deliver(client, simulator, payload, key)

    def lands() -> str:
        """A head lands and its Push Hook is resolved (the hook is a hint: the head is
        read from GitLab when the hook is resolved, so each is resolved before the next
        lands, as heads landing minutes apart would be)."""
        sha = land(simulator)
        assert send(push_hook(simulator, sha)) == "accepted"
        wait_until(lambda: head(sessions, sha) is not None, what=f"head {sha} ingested")
        return sha

    def redeliver_everything() -> None:
        """Every hook so far, again: once with its own key, once as a new delivery."""
        for payload, key in delivered:
            assert deliver(client, simulator, payload, key) == "duplicate"
            deliver(client, simulator, payload)

    with trunk_app(database_url, simulator) as client:
        a = lands()
        wait_until(lambda: building(sessions, a), what="A building")
        assert in_flight(sessions) == 1
        assert head(sessions, a).build_strategy == "full"  # cold start: no last green
        assert head(sessions, a).base_sha is None

        b, c, d = lands(), lands(), lands()
        wait_until(
            lambda: state_is(sessions, b, "superseded") and state_is(sessions, c, "superseded"),
            what="B and C superseded",
        )
        assert state_is(sessions, d, "accepted")  # newest, but the only slot is A's
        assert in_flight(sessions) == 1
        assert queue_row(sessions).latest_item_id == head(sessions, d).id
        redeliver_everything()
        assert len(heads(sessions)) == 4
        assert in_flight(sessions) == 1

        a_pipeline = head(sessions, a).pipeline_id
        finish_pipeline(simulator, a_pipeline)
        send(simulator.pipeline_hook(a_pipeline))
        wait_until(lambda: building(sessions, d), what="D building")
        assert state_is(sessions, a, "succeeded")
        assert head(sessions, a).completion_reason == "green"
        assert queue_row(sessions).last_green_sha == a
        assert in_flight(sessions) == 1
        assert (head(sessions, d).build_strategy, head(sessions, d).base_sha) == ("incremental", a)

        e, f = lands(), lands()
        wait_until(lambda: state_is(sessions, e, "superseded"), what="E superseded")
        assert state_is(sessions, f, "accepted")
        assert in_flight(sessions) == 1
        redeliver_everything()
        assert in_flight(sessions) == 1
        assert queue_row(sessions).last_green_sha == a

        d_pipeline = head(sessions, d).pipeline_id
        finish_pipeline(simulator, d_pipeline)
        send(simulator.pipeline_hook(d_pipeline))
        wait_until(lambda: building(sessions, f), what="F building")
        assert queue_row(sessions).last_green_sha == d
        assert in_flight(sessions) == 1
        assert (head(sessions, f).build_strategy, head(sessions, f).base_sha) == ("incremental", d)

        f_pipeline = head(sessions, f).pipeline_id
        finish_pipeline(simulator, f_pipeline)
        send(simulator.pipeline_hook(f_pipeline))
        wait_until(lambda: state_is(sessions, f, "succeeded"), what="F green")
        assert in_flight(sessions) == 0
        row = queue_row(sessions)
        assert (row.last_green_sha, row.last_green_item_id) == (f, head(sessions, f).id)

        redeliver_everything()
        wait_until(lambda: in_flight(sessions) == 0, what="nothing in flight")

    final = heads(sessions)
    assert {sha: h.state for sha, h in final.items()} == {
        a: "succeeded",
        b: "superseded",
        c: "superseded",
        d: "succeeded",
        e: "superseded",
        f: "succeeded",
    }
    assert all(h.phase == "completed" for h in final.values())
    assert {h.completion_reason for h in final.values()} == {"green", "superseded"}
    # One pipeline per validated head, with the service's variables.
    pipelines = simulator.pipeline_ids("group/app", source="api")
    assert pipelines == [a_pipeline, d_pipeline, f_pipeline]
    variables = simulator.pipeline_variables(d_pipeline)
    assert variables == {
        "WORKQUEUE_TRUNK_REQUEST": str(final[d].id),
        "WORKQUEUE_TRUNK_SHA": d,
        "WORKQUEUE_BUILD_STRATEGY": "incremental",
        "WORKQUEUE_BASE_SHA": a,
    }
    assert simulator.pipeline_variables(a_pipeline)["WORKQUEUE_BASE_SHA"] == ""
