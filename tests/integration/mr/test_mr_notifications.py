"""An `mr` item's life announces itself to subscribers with no mr-specific code."""

from __future__ import annotations

from harness import wait_until
from mr_harness import PROJECT
from outbox_harness import make_outbox, new_secret, running_deliveries, subscriber
from standardwebhooks import Webhook
from test_mr_checks import report
from test_mr_lifecycle_merge import green_pipeline
from test_mr_lifecycle_support import gitlab, lifecycle
from webhook_receiver import webhook_receiver

from workqueue.queue.models import Phase


def test_a_merged_mr_reaches_the_subscriber_as_work_item_completed(sessions, conninfo):
    secret = new_secret()
    with webhook_receiver() as receiver:
        box = make_outbox(
            subscriber(
                "chatops",
                receiver.url,
                ["work_item.completed", "work_item.failed"],
                secret=secret,
                item_types=["mr"],
                projects=[PROJECT.split("/")[0] + "/**"],
            )
        )
        box.attach(sessions)
        with (
            running_deliveries(sessions, box, conninfo=conninfo),
            gitlab() as simulator,
            lifecycle(sessions, simulator) as world,
        ):
            item_id, iid = world.open_mr()
            world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
            world.wait_phase(item_id, Phase.COMPLETED)
            wait_until(lambda: receiver.hits() == 1, timeout=10, what="the notification")
        (request,) = receiver.snapshot()

    payload = Webhook(secret).verify(request.body, request.headers)
    assert payload["type"] == "work_item.completed"
    assert payload["data"] == {
        "work_item_id": str(item_id),
        "item_type": "mr",
        "phase": "completed",
        "project": PROJECT,
        "completion_reason": "merged",
    }


def test_with_checks_after_the_merge_completed_goes_out_only_after_them(sessions, conninfo):
    checks = {"checks": {"after_merge": [{"name": "build", "variants": ["api"]}]}}
    with webhook_receiver() as receiver:
        box = make_outbox(subscriber("chatops", receiver.url, ["work_item.completed"]))
        box.attach(sessions)
        with (
            running_deliveries(sessions, box, conninfo=conninfo),
            gitlab() as simulator,
            lifecycle(sessions, simulator, **checks) as world,
        ):
            item_id, iid = world.open_mr()
            world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
            wait_until(
                lambda: simulator.merge_request(PROJECT, iid)["state"] == "merged",
                what="merged",
            )
            world.wait_settled()
            assert world.item(item_id).phase == Phase.ACTIVE  # waiting for the build
            assert receiver.hits() == 0
            report(world, world.detail(item_id).merge_commit_sha, "api", "success")
            world.wait_phase(item_id, Phase.COMPLETED)
            wait_until(lambda: receiver.hits() == 1, timeout=10, what="the notification")
        (request,) = receiver.snapshot()
    assert b'"work_item.completed"' in request.body
