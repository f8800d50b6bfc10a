"""The plain-http warning for a GitLab URL is logged once per process, however often types load."""

from __future__ import annotations

import logging
import uuid

from workqueue.types.catalog import build_registry
from workqueue.types.plugin import InstallContext


def test_plain_http_is_warned_about_once_per_type_and_url(caplog):
    url = f"http://gitlab-{uuid.uuid4().hex[:8]}.example"  # not warned about by another test
    context = InstallContext(gitlab_token="t")
    with caplog.at_level(logging.WARNING, logger="workqueue.types.gitlab_connection"):
        for _ in range(3):  # serve installs once to validate, once to run; tests more often
            build_registry({"mr": {"gitlab_url": url}}, context)
    warnings = [
        record.getMessage() for record in caplog.records if "plain http" in record.getMessage()
    ]
    expected = (
        f"handled_types.mr.gitlab_url {url} is plain http: the GitLab token crosses the "
        "network unencrypted (acceptable for local development only)"
    )
    assert warnings == [expected]
    assert "None" not in warnings[0]
