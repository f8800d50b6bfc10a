"""PipelineRun CloudEvents to signals: the mapping, as table tests. Pure."""

from __future__ import annotations

import pytest
from tekton_sender import pipeline_run

from workqueue.signals.signal import CheckStatus
from workqueue.signals.tekton import (
    NotAPipelineRunError,
    TektonCheck,
    TektonConfig,
    TektonMatch,
    event_key,
    project_of,
    run_reports,
)

SHA = "b" * 40
DEFAULT = TektonConfig().checks


@pytest.mark.parametrize(
    ("reason", "condition", "status"),
    [
        ("started", "Started", CheckStatus.PENDING),
        ("running", "Running", CheckStatus.RUNNING),
        ("successful", "Succeeded", CheckStatus.SUCCESS),
        ("failed", "Failed", CheckStatus.FAILED),
        ("failed", "PipelineRunTimeout", CheckStatus.FAILED),
        ("failed", "Cancelled", CheckStatus.CANCELED),
        ("failed", "StoppedRunningFinally", CheckStatus.CANCELED),
        ("unknown", "Running", CheckStatus.RUNNING),
    ],
)
def test_each_pipelinerun_event_has_its_status(reason, condition, status):
    data = pipeline_run(sha=SHA, reason=condition)
    (report,) = run_reports(f"dev.tekton.event.pipelinerun.{reason}.v1", data, None, DEFAULT)
    assert report.status is status
    assert (report.project, report.sha, report.name, report.variant) == (
        "team/app",
        SHA,
        "build",
        "api",
    )
    assert report.url == "https://konflux.example/ns/pipelinerun/build-1"


@pytest.mark.parametrize(
    "event_type",
    [
        "dev.tekton.event.taskrun.successful.v1",  # a TaskRun, not the pipeline
        "dev.tekton.event.pipelinerun.successful.v2",
        "dev.tekton.event.pipelinerun.exploded.v1",
        "com.example.other",
    ],
)
def test_other_events_are_not_pipelinerun_events(event_type):
    with pytest.raises(NotAPipelineRunError):
        run_reports(event_type, pipeline_run(sha=SHA), None, DEFAULT)


@pytest.mark.parametrize("data", [None, [], {}, {"pipelineRun": []}, {"pipelineRun": {}}])
def test_data_without_a_pipelinerun_is_refused(data):
    with pytest.raises(NotAPipelineRunError):
        run_reports("dev.tekton.event.pipelinerun.successful.v1", data, None, DEFAULT)


def test_the_default_check_takes_konflux_push_builds_only():
    successful = "dev.tekton.event.pipelinerun.successful.v1"
    on_mr = pipeline_run(sha=SHA, event_type="Merge_Request")
    assert run_reports(successful, on_mr, None, DEFAULT) == []
    checks = [
        TektonCheck(name="build", match=TektonMatch(annotations={})),
        TektonCheck(
            name="release",
            match=TektonMatch(labels={"tekton.dev/pipeline": "build"}),
            variant_from="annotations.pipelinesascode.tekton.dev/event-type",
        ),
    ]
    reports = run_reports(successful, on_mr, None, checks)
    assert [(r.name, r.variant) for r in reports] == [
        ("build", "api"),
        ("release", "Merge_Request"),
    ]
    # A run without the component label reports the check's single variant "".
    (lone,) = run_reports(successful, pipeline_run(sha=SHA, component=None), None, DEFAULT)
    assert lone.variant == ""


@pytest.mark.parametrize(
    ("annotations", "project"),
    [
        (
            {
                "pipelinesascode.tekton.dev/url-org": "team/sub",
                "pipelinesascode.tekton.dev/url-repository": "app",
            },
            "team/sub/app",
        ),
        (
            {"pipelinesascode.tekton.dev/repo-url": "https://gitlab.example/team/app.git"},
            "team/app",
        ),
        ({"pipelinesascode.tekton.dev/repo-url": "https://gitlab.example/"}, None),
        ({"pipelinesascode.tekton.dev/url-org": "team"}, None),
        ({}, None),
    ],
)
def test_the_project_comes_from_pipelines_as_code(annotations, project):
    assert project_of(annotations) == project


@pytest.mark.parametrize(
    ("section", "reason"),
    [
        ({"secret_env": "TEKTON_SECRET"}, "secret_env needs projects or namespaces"),
        ({"secret_env": "S", "namespaces": {"Team_NS": ["a/b"]}}, "namespace"),
        ({"secret_env": "S", "namespaces": {"team": []}}, "at least 1"),
        ({"secret_env": "S", "namespaces": {"team": ["{sub}/*"]}}, "carries no claims"),
        ({"secret_env": "lower", "projects": ["a/b"]}, "should match pattern"),
        ({"secret_env": "S", "projects": ["{project_path}"]}, "carries no claims"),
        ({"checks": [{"name": "b", "variant_from": "spec.x"}]}, "variant_from must be"),
    ],
)
def test_tekton_config_mistakes_are_refused(section, reason):
    with pytest.raises(ValueError, match=reason):
        TektonConfig.model_validate(section)


def test_a_run_reports_its_namespace():
    data = {
        "pipelineRun": {
            "metadata": {
                "namespace": "team-tenant",
                "annotations": {
                    "pipelinesascode.tekton.dev/sha": "a" * 40,
                    "pipelinesascode.tekton.dev/event-type": "push",
                },
            }
        }
    }
    [report] = run_reports(
        "dev.tekton.event.pipelinerun.successful.v1", data, None, TektonConfig().checks
    )
    assert report.namespace == "team-tenant"


@pytest.mark.parametrize(
    ("section", "namespace", "project", "allowed"),
    [
        ({"projects": ["team/*"]}, "anyone", "team/app", True),
        ({"projects": ["team/*"]}, "anyone", "other/app", False),
        ({"namespaces": {"team-tenant": ["team/**"]}}, "team-tenant", "team/sub/app", True),
        # another tenant's run naming the team's project: refused
        ({"namespaces": {"team-tenant": ["team/**"]}}, "evil-tenant", "team/app", False),
        ({"namespaces": {"team-tenant": ["team/**"]}}, None, "team/app", False),
        ({"namespaces": {"team-tenant": ["team/**"]}}, "team-tenant", "other/app", False),
        ({"projects": ["shared/*"], "namespaces": {"t": ["team/*"]}}, "x", "shared/a", True),
    ],
)
def test_what_the_secret_may_report_on(section, namespace, project, allowed):
    config = TektonConfig.model_validate({"secret_env": "S", **section})
    assert config.secret_may_report(project, namespace) is allowed


def test_event_keys_name_one_event_each():
    """A key per (source, id, check), unambiguous and of bounded length whatever they hold."""
    assert event_key({"source": "a:b", "id": "c"}, "build") != event_key(
        {"source": "a", "id": "b:c"}, "build"
    )
    long_source = "/" + "x" * 260
    first = event_key({"source": long_source, "id": "1"}, "build")
    assert first != event_key({"source": long_source, "id": "2"}, "build")
    assert first is not None
    assert len(first) <= 255
    assert event_key({"source": "s", "id": "1"}, "build") != event_key(
        {"source": "s", "id": "1"}, "release"
    )
    assert event_key({"source": "s"}, "build") is None  # no id: nothing names the delivery
