"""deploy/grafana and deploy/prometheus use only metrics and labels the service really exports.

The reference is a real /metrics answer of an app built by `create_app` on
a test database, with the `mr` type handled against the GitLab simulator,
after an item was processed and a webhook refused. A metric family that has
no sample yet (lease losses, say) still appears there by its HELP and TYPE
lines; its sample names follow from its type.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from api_harness import build_client
from databases import create_database_from, drop_database
from harness import wait_until
from mr_harness import FILES, PROJECT, TOKEN
from prometheus_client.parser import text_string_to_metric_families

from workqueue.testing.gitlab_simulator import GitLabSimulator

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "workqueue-service.json"
ALERTS = ROOT / "deploy" / "prometheus" / "workqueue-alerts.yml"
OPERATE = ROOT / "docs" / "howto" / "operate.md"
# Series Prometheus makes itself, not the service.
SYNTHETIC = {"up"}
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
    "summary": ("", "_count", "_sum", "_created"),
}
SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "and", "or", "unless", "le", "inf",
}  # fmt: skip


@pytest.fixture(scope="module")
def exported(server_url, template_url) -> dict[str, set[str]]:
    url = create_database_from(server_url, template_url.database)
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    simulator.create_project(PROJECT, FILES)
    try:
        with build_client(url, simulator, webhook_secret="right") as client:
            created = client.post(
                "/api/work-items/mr",
                json={
                    "project": PROJECT,
                    "source_branch": "workqueue/metrics",
                    "title": "Metrics",
                    "commit_message": "Metrics",
                    "file_actions": [
                        {"action": "update", "file_path": "kernel.spec", "content": "V: 5\n"}
                    ],
                },
            )
            assert created.status_code == 201, created.text
            item_id = created.json()["id"]
            wait_until(lambda: client.get(f"/api/work-items/{item_id}").json()["details"]["mr_iid"])
            refused = client.post(
                "/api/webhooks/gitlab", content=b"{}", headers={"X-Gitlab-Token": "wrong"}
            )
            assert refused.status_code == 401
            text = client.get("/metrics").text
    finally:
        simulator.stop()
        drop_database(server_url, url)
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for suffix in SUFFIXES.get(family.type, ("",)):
            names.setdefault(family.name + suffix, set())
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def _dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def _alert_rules() -> list[dict]:
    document = yaml.safe_load(ALERTS.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def _series(expression: str) -> list[tuple[str, set[str]]]:
    """(metric name, label names in its matchers) for every selector in a PromQL expression."""
    without_strings = re.sub(r'"[^"]*"', '""', expression)
    grouped = {
        label.strip() for labels in GROUPING.findall(without_strings) for label in labels.split(",")
    }
    found = []
    for match in SELECTOR.finditer(without_strings):
        name, matchers = match[1], match[2] or ""
        following = without_strings[match.end() :].lstrip()
        if not matchers and re.match(r"\(|by\b|without\b", following):
            continue  # a function call or an aggregation
        if without_strings[: match.start()].endswith("$"):
            continue  # a Grafana variable ($__rate_interval)
        if name in PROMQL_WORDS or name in grouped or name.startswith("$"):
            continue
        if re.fullmatch(r"\d+[smhdwy]?", name):
            continue
        labels = {label for label, _operator in MATCHER.findall(matchers)}
        found.append((name, labels))
    return found


def _all_expressions() -> list[str]:
    return _dashboard_expressions() + [rule["expr"] for rule in _alert_rules()]


def test_expressions_are_found():
    expressions = _all_expressions()
    assert len(expressions) > 20
    used = {name for expression in expressions for name, _ in _series(expression)}
    assert "workqueue_http_requests_total" in used
    assert "workqueue_oldest_due_item_age_seconds" in used
    # Functions, aggregations and Grafana variables are not series.
    assert not used & {"sum", "max", "rate", "histogram_quantile", "__rate_interval"}


def test_every_metric_used_is_exported(exported):
    missing = {
        name
        for expression in _all_expressions()
        for name, _ in _series(expression)
        if name not in exported and name not in SYNTHETIC
    }
    assert missing == set()


def test_every_label_used_exists_on_its_metric(exported):
    wrong = []
    checked = 0
    for expression in _all_expressions():
        grouping = {
            label.strip()
            for labels in GROUPING.findall(re.sub(r'"[^"]*"', '""', expression))
            for label in labels.split(",")
            if label.strip()
        }
        series = [(name, labels) for name, labels in _series(expression) if name not in SYNTHETIC]
        available = set().union(*(exported.get(name, set()) for name, _ in series)) | {
            "le",
            "instance",
            "job",
            "pod",
            "namespace",
        }
        if not all(exported.get(name) for name, _ in series):
            continue  # a family without samples yet does not tell its labels
        checked += 1
        for name, labels in series:
            wrong += [(name, label) for label in labels if label not in exported[name]]
        wrong += [(expression, label) for label in grouping if label not in available]
    assert wrong == []
    assert checked >= 20


def test_the_dashboard_is_well_formed():
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {variable["name"] for variable in dashboard["templating"]["list"]}
    assert variables == {"datasource"}
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= 24
    for expression in _dashboard_expressions():
        assert expression.count("(") == expression.count(")"), expression
        assert expression.count("{") == expression.count("}"), expression


def _anchors(markdown: str) -> set[str]:
    """Heading anchors as Python-Markdown's toc extension makes them (the docs site's)."""
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, flags=re.MULTILINE):
        text = re.sub(r"[`*_]", "", heading)
        slug = re.sub(r"[^\w\s-]", "", text).strip().lower()
        anchors.add(re.sub(r"[-\s]+", "-", slug))
    return anchors


def test_every_alert_is_explained_in_the_operations_guide():
    anchors = _anchors(OPERATE.read_text())
    rules = _alert_rules()
    assert len(rules) >= 6
    for rule in rules:
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]
        page, _, anchor = rule["annotations"]["runbook"].partition("#")
        assert page == "docs/howto/operate.md"
        assert anchor == rule["alert"].lower()
        assert anchor in anchors, f"docs/howto/operate.md has no section {rule['alert']}"
    assert {rule["alert"] for rule in rules} >= {
        "WorkqueueItemsFailing",
        "WorkqueueBacklogStalled",
        "WorkqueueWebhookUnauthorized",
        "WorkqueueCIRetryBreakerOpen",
        "WorkqueueLeaseLosses",
    }
