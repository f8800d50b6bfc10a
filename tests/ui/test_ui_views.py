"""What the templates are given: links only for http(s), pipelines derived from the MR, ages."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from workqueue.api.schemas import DimensionBody, WorkItemBody
from workqueue.ui import views

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def body(**details) -> WorkItemBody:
    return WorkItemBody(
        id=uuid.uuid4(),
        item_type="mr",
        phase="active",
        actionable=False,
        attempts=0,
        error=None,
        caller_identity="bot",
        idempotency_key=None,
        generation=1,
        leased_until=None,
        next_attempt_at=None,
        last_event_at=None,
        created_at=NOW,
        updated_at=NOW,
        details=details,
    )


def test_only_http_urls_become_links():
    for url in ("javascript:alert(1)", "data:text/html,x", "//evil.example/x", "http:/x", 5, None):
        assert views.merge_request_link(body(mr_url=url, mr_iid=1)) is None, url
    link = views.merge_request_link(body(mr_url="https://gitlab.example/g/p/-/merge_requests/7"))
    assert link == views.Link("merge request", "https://gitlab.example/g/p/-/merge_requests/7")


def test_the_pipeline_link_comes_from_the_mr_or_the_item():
    mr = "https://gitlab.example/g/p/-/merge_requests/7"
    derived = views.pipeline_link(
        body(mr_url=mr, head_pipeline_id=41, head_pipeline_status="success")
    )
    assert derived == views.Link(
        "pipeline #41 (success)", "https://gitlab.example/g/p/-/pipelines/41"
    )
    assert views.pipeline_link(body(mr_url=mr)) is None
    own = views.pipeline_link(body(pipeline_id=9, pipeline_url="https://gitlab.example/p/9"))
    assert own == views.Link("pipeline #9", "https://gitlab.example/p/9")
    assert views.pipeline_link(body(pipeline_id=9, pipeline_url="javascript:x")) is None


def test_ages_and_pending_times_read_as_people_say_them():
    assert views.age(NOW - timedelta(seconds=12), NOW) == "12 s ago"
    assert views.age(NOW + timedelta(minutes=4, seconds=5), NOW) == "in 4 min"
    assert views.age(NOW - timedelta(hours=3), NOW) == "3 h ago"
    assert views.age(None, NOW) == ""
    rows = [
        DimensionBody(
            dimension="needs_reconcile",
            variant="",
            status="true",
            pending_until=NOW + timedelta(minutes=30),
            updated_at=NOW,
        ),
        DimensionBody(
            dimension="needs_ci",
            variant="lint",
            status="true",
            pending_until=NOW - timedelta(seconds=1),
            updated_at=NOW,
        ),
    ]
    shown = views.dimensions(rows, NOW)
    assert [(row.name, row.pending) for row in shown] == [
        ("needs_reconcile", "in 30 min"),
        ("needs_ci[lint]", "due now"),
    ]


def test_problems_and_changes_never_print_none():
    blocked = body(merge_blocker={"code": "not_approved", "message": "approvals missing"})
    assert views.problem(blocked) == "approvals missing"
    assert views.problem(body(merge_blocker=None)) == ""
    assert views.text(None) == ""
    assert views.text(True) == "true"  # noqa: FBT003 - the value under test
    assert views.change_summary({"phase": "active"}, {"phase": "completed"}) == (
        "phase: active → completed"
    )
    assert views.change_summary(None, {"variant": "", "status": None, "phase": "active"}) == (
        "phase: active"
    )
    assert views.change_summary({"error": None}, {"error": "boom"}) == "error: ∅ → boom"


def test_checks_are_listed_per_commit_with_links_only_for_http():
    check = {"name": "build", "status": "success", "updated_at": (NOW - timedelta(minutes=3))}
    item = body(
        checks=[
            {"name": "scan", "variant": "", "status": "pending", "url": None, "updated_at": None}
        ],
        post_merge={
            "merge_commit_sha": "c" * 40,
            "checks": [
                {
                    **check,
                    "variant": "api",
                    "url": "https://konflux.example/run/1",
                    "updated_at": check["updated_at"].isoformat(),
                },
                {
                    **check,
                    "variant": "worker",
                    "status": "failed",
                    "url": "javascript:alert(1)",
                    "updated_at": check["updated_at"].isoformat(),
                },
                "not a check",
            ],
        },
    )
    assert views.checks(item, NOW) == [
        views.CheckView("MR head", "scan", "pending", None, ""),
        views.CheckView(
            "merge commit", "build / api", "success", "https://konflux.example/run/1", "3 min ago"
        ),
        views.CheckView("merge commit", "build / worker", "failed", None, "3 min ago"),
    ]
    # The checks are their own panel, not a detail row.
    rows = dict(views.detail_rows(item))
    assert "checks" not in rows
    assert rows["post_merge"] == f"merge_commit_sha={'c' * 40}"
    assert views.checks(body(), NOW) == []


def test_an_agent_tasks_thread_and_the_item_it_made_are_links():
    made = str(uuid.uuid4())
    item = body(
        note_url="https://gitlab.example/g/p/-/issues/4#note_77",
        noteable_type="issue",
        noteable_iid=4,
        mr_item_id=made,
        request="bump the kernel",
    )
    assert views.thread_link(item) == views.Link(
        "thread on #4", "https://gitlab.example/g/p/-/issues/4#note_77"
    )
    assert views.related_items(item) == [("mr_item_id", made)]
    assert views.summary(item) == "bump the kernel"
    assert "note_url" not in dict(views.detail_rows(item))
    assert views.thread_link(body(note_url="javascript:alert(1)")) is None
    assert views.related_items(body(mr_item_id="not-an-id")) == []


def test_a_hold_reads_apart_from_a_failure():
    assert views.problem_kind(body(merge_blocker={"code": "auto_merge_disabled"})) == "hold"
    assert views.problem_kind(body(merge_blocker={"code": "draft"})) == "hold"
    assert views.problem_kind(body(merge_blocker={"code": "pipeline_failed"})) == "waiting"
    failed = body().model_copy(update={"phase": "failed", "error": "GitLab refused"})
    assert views.problem_kind(failed) == "failure"
    assert views.problem_kind(body()) == ""
