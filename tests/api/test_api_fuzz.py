"""Property-based requests generated from /openapi.json: whatever comes in, never a 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from api_harness import build_client
from databases import create_database_from, drop_database
from hypothesis import HealthCheck, given, settings
from mr_harness import FILES, PROJECT, TOKEN

from workqueue.testing.gitlab_simulator import GitLabSimulator

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api_base_url(server_url, template_url) -> Iterator[str]:
    url = create_database_from(server_url, template_url.database)
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    simulator.create_project(PROJECT, FILES)
    try:
        with build_client(url, simulator) as client:
            yield str(client.base_url).rstrip("/")
    finally:
        simulator.stop()
        drop_database(server_url, url)


def test_no_input_makes_a_server_error(api_base_url):
    schema = schemathesis.openapi.from_url(f"{api_base_url}/openapi.json")
    checked = []
    calls: list[int] = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=30,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def no_server_error(case):
            response = case.call(base_url=api_base_url)
            calls.append(response.status_code)
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path}: {response.status_code} {response.text}"
            )

        no_server_error()
        checked.append(f"{operation.method.upper()} {operation.path}")
    print(f"{len(calls)} generated requests, statuses {sorted(set(calls))}")
    assert len(calls) > 50
    assert "POST /api/work-items/mr" in checked
    assert "POST /api/work-items/{item_id}/cancel" in checked
