"""The demo's CI runner: one passing pipeline per MR head, its hook resent until taken."""

from __future__ import annotations

from webhook_receiver import webhook_receiver

from workqueue.testing.demo_gitlab import PROJECT, PROJECT_FILES, CiRunner
from workqueue.testing.gitlab_simulator import GitLabSimulator


def test_each_new_mr_head_gets_one_passing_pipeline_announced_until_the_service_takes_it():
    announced: list[tuple[int, int]] = []
    with (
        GitLabSimulator() as simulator,
        webhook_receiver(script=[401, 503]) as service,  # wrong secret, then not ready
    ):
        simulator.create_project(PROJECT, PROJECT_FILES)
        head = simulator.push(PROJECT, "workqueue/a", {"a.txt": "a\n"})
        simulator.create_merge_request(PROJECT, source_branch="workqueue/a", title="A")
        runner = CiRunner(
            simulator, service.url, "the-secret", lambda *seen: announced.append(seen)
        )

        for _ in range(4):
            runner.run_once()

        (pipeline_id,) = simulator.state.pipelines  # no pipeline ran twice
        pipeline = simulator.pipeline(pipeline_id)
        assert (pipeline["sha"], pipeline["status"]) == (head, "success")
        assert announced == [(1, pipeline_id)]
        hooks = service.snapshot()
        assert len(hooks) == 3  # refused twice, taken once, then left alone
        assert {hook.json["object_attributes"]["id"] for hook in hooks} == {pipeline_id}
        assert {hook.headers["x-gitlab-token"] for hook in hooks} == {"the-secret"}

        # A new head (someone pushed to the MR) is a new pipeline.
        second_head = simulator.push(PROJECT, "workqueue/a", {"a.txt": "b\n"})
        runner.run_once()
        assert len(simulator.state.pipelines) == 2
        (_, second_id) = announced[1]
        assert simulator.pipeline(second_id)["sha"] == second_head
