"""Attack (fixed): the number of `labels` was unbounded (only each label's length was).

Within the 16 MiB body limit a caller can send ~1.5 million distinct labels.
They pass the policy (seconds of CPU per request on the event loop's worker
thread), are stored in one row and echoed back in every answer, and
ensure_mr sends them to GitLab, which creates a project label for each
unknown name as the service's user: an amplification the per-caller limits
do not cover. GitLab itself caps nothing here either.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from api_harness import build_client
from scoping_support import ADMIN_SUB, OWN, scoped_rules, submission, token


@pytest.fixture
def client(database_url, simulator, issuer, projects) -> Iterator[httpx.Client]:
    del projects
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        process_items=False,
    ) as test_client:
        yield test_client


def test_a_submission_with_a_million_distinct_labels_is_refused(client, issuer, key):
    labels = [f"l{n}" for n in range(1_000_000)]
    body = json.dumps(submission(OWN, labels=labels)).encode()
    assert len(body) < 16 * 1024 * 1024
    started = time.monotonic()
    answer = client.post(
        "/api/work-items/mr",
        content=body,
        headers={**token(issuer, key, ADMIN_SUB), "Content-Type": "application/json"},
        timeout=120,
    )
    took = time.monotonic() - started
    assert answer.status_code == 422, f"{answer.status_code} after {took:.1f} s"
