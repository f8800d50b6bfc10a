"""Project webhooks delivered as GitLab delivers them: lost deliveries, hooks disabled by
hand, and GitLab's auto-disabling of a hook whose receiver keeps failing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec, ProjectHook

OTHER_PROJECT = "acme/other"


@dataclass
class Endpoint:
    """A receiver answering `status` (changeable) and recording (event header, body)."""

    url: str
    status: int = 200
    received: list[tuple[str, dict]] = field(default_factory=list)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.received.append((self.headers["X-Gitlab-Event"], json.loads(body)))
            self.send_response(state.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def mr(sim, project_id, bot_branch):
    return sim.create_merge_request(project_id, "bot/bump-requests", "Bump requests")


def kinds(endpoint):
    return [header for header, _ in endpoint.received]


def test_emit_posts_to_the_project_hooks_with_their_secret(sim, project_id, mr, endpoint):
    hook_id = sim.add_project_hook(project_id, endpoint.url, secret_token="s3cret")
    [delivery] = sim.emit(sim.merge_request_hook(project_id, mr, action="open"))
    assert (delivery.hook_id, delivery.outcome, delivery.status) == (hook_id, "delivered", 200)
    assert delivery.kind == "merge_request"
    assert kinds(endpoint) == ["Merge Request Hook"]
    assert sim.hook_deliveries() == [delivery]


def test_emit_reaches_only_the_payloads_project(sim, project_id, mr, endpoint):
    other = sim.create_project(OTHER_PROJECT, {"README.md": "x\n"})
    sim.add_project_hook(other, endpoint.url)
    assert sim.emit(sim.merge_request_hook(project_id, mr)) == []
    assert endpoint.received == []


def test_every_delivery_can_be_lost(sim, project_id, mr, endpoint):
    sim.add_project_hook(project_id, endpoint.url)
    rule = sim.lose_hooks()
    pipeline = sim.create_pipeline(project_id, merge_request_iid=mr, jobs=[JobSpec("t")])
    outcomes = [
        delivery.outcome
        for payload in (sim.merge_request_hook(project_id, mr), sim.pipeline_hook(pipeline))
        for delivery in sim.emit(payload)
    ]
    assert outcomes == ["lost", "lost"]
    assert endpoint.received == []
    assert rule.lost == 2

    rule.stop()
    assert [d.outcome for d in sim.emit(sim.pipeline_hook(pipeline))] == ["delivered"]


def test_losses_by_project_and_by_kind(sim, project_id, mr, endpoint):
    other = sim.create_project(OTHER_PROJECT, {"README.md": "x\n"})
    other_mr_branch = sim.push(other, "feature", {"README.md": "y\n"})
    assert other_mr_branch
    other_mr = sim.create_merge_request(other, "feature", "Feature")
    sim.add_project_hook(project_id, endpoint.url)
    sim.add_project_hook(other, endpoint.url)
    sim.lose_hooks(project=project_id, kinds=["pipeline"])

    pipeline = sim.create_pipeline(project_id, merge_request_iid=mr, jobs=[JobSpec("t")])
    other_pipeline = sim.create_pipeline(other, merge_request_iid=other_mr, jobs=[JobSpec("t")])
    assert [d.outcome for d in sim.emit(sim.pipeline_hook(pipeline))] == ["lost"]
    assert [d.outcome for d in sim.emit(sim.merge_request_hook(project_id, mr))] == ["delivered"]
    assert [d.outcome for d in sim.emit(sim.pipeline_hook(other_pipeline))] == ["delivered"]
    assert kinds(endpoint) == ["Merge Request Hook", "Pipeline Hook"]


def test_a_loss_of_the_next_n_deliveries_ends_by_itself(sim, project_id, mr, endpoint):
    sim.add_project_hook(project_id, endpoint.url)
    rule = sim.lose_hooks(count=2)
    outcomes = [sim.emit(sim.merge_request_hook(project_id, mr))[0].outcome for _ in range(3)]
    assert outcomes == ["lost", "lost", "delivered"]
    assert (rule.lost, rule.active) == (2, False)
    with pytest.raises(ValueError, match="count"):
        sim.lose_hooks(count=0)


def test_keep_hooks_stops_every_loss(sim, project_id, mr, endpoint):
    sim.add_project_hook(project_id, endpoint.url)
    sim.lose_hooks(kinds=["merge_request"])
    sim.lose_hooks(project=project_id)
    sim.keep_hooks()
    assert [d.outcome for d in sim.emit(sim.merge_request_hook(project_id, mr))] == ["delivered"]


def test_a_job_hook_without_project_is_lost_by_its_project_id(endpoint):
    with GitLabSimulator(gitlab_version="15.11") as old:
        pid = old.create_project("acme/old", {"README.md": "x\n"})
        old.push(pid, "feature", {"README.md": "y\n"})
        iid = old.create_merge_request(pid, "feature", "Feature")
        pipeline = old.create_pipeline(
            pid, merge_request_iid=iid, jobs=[JobSpec("unit", status="failed")]
        )
        [job] = old.jobs(pipeline)
        old.add_project_hook(pid, endpoint.url)
        old.lose_hooks(project=pid, kinds=["build"])
        payload = old.job_hook(job["id"])
        assert "project" not in payload
        assert [d.outcome for d in old.emit(payload)] == ["lost"]
        old.close_webhook_client()
    assert endpoint.received == []


def test_disabled_hooks_are_skipped_until_enabled(sim, project_id, mr, endpoint):
    hook_id = sim.add_project_hook(project_id, endpoint.url)
    sim.disable_project_hooks(project_id)
    assert [d.outcome for d in sim.emit(sim.merge_request_hook(project_id, mr))] == ["disabled"]
    assert endpoint.received == []
    assert sim.project_hook(hook_id).permanently_disabled

    sim.enable_project_hooks(project_id)
    assert [d.outcome for d in sim.emit(sim.merge_request_hook(project_id, mr))] == ["delivered"]


def test_a_hook_failing_four_times_is_disabled_by_gitlab(sim, project_id, mr, endpoint):
    hook_id = sim.add_project_hook(project_id, endpoint.url)
    endpoint.status = 500
    before = datetime.now(UTC)
    answers = [sim.emit(sim.merge_request_hook(project_id, mr))[0] for _ in range(4)]
    assert [(a.outcome, a.status) for a in answers] == [("failed", 500)] * 4
    hook = sim.project_hook(hook_id)
    assert hook.recent_failures == 4
    assert hook.disabled_until is not None
    assert before + timedelta(minutes=1) <= hook.disabled_until
    assert hook.disabled_until <= datetime.now(UTC) + timedelta(minutes=1)

    endpoint.status = 200  # the receiver is fixed, but GitLab no longer sends
    assert [d.outcome for d in sim.emit(sim.merge_request_hook(project_id, mr))] == ["disabled"]
    assert len(endpoint.received) == 4


def test_a_receiver_that_is_not_there_counts_as_a_failure(sim, project_id, mr):
    hook_id = sim.add_project_hook(project_id, "http://127.0.0.1:9/hooks")
    [delivery] = sim.emit(sim.merge_request_hook(project_id, mr), timeout=1)
    assert (delivery.outcome, delivery.status) == ("failed", None)
    assert sim.project_hook(hook_id).recent_failures == 1


def test_auto_disabling_backs_off_doubling_then_disables_for_good():
    hook = ProjectHook(1, 42, "http://x", None)
    now = datetime(2025, 3, 1, tzinfo=UTC)
    periods = []
    for _ in range(13):
        hook.record_failure(now)
        periods.append(None if hook.disabled_until is None else hook.disabled_until - now)
    minute = timedelta(minutes=1)
    assert periods[:3] == [None, None, None]
    assert periods[3:7] == [minute, 2 * minute, 4 * minute, 8 * minute]
    assert periods[12] == 512 * minute
    for _ in range(20):
        hook.record_failure(now)
    assert hook.disabled_until == now + timedelta(hours=24)  # the cap
    assert not hook.permanently_disabled
    for _ in range(7):
        hook.record_failure(now)
    assert hook.recent_failures == 40
    assert hook.permanently_disabled
    assert hook.disabled_at(now + timedelta(days=30))

    hook.permanently_disabled = False
    hook.record_success()
    assert (hook.recent_failures, hook.disabled_until) == (0, None)
    assert not hook.disabled_at(now)
