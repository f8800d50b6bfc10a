"""Attack-review: a GitLab answer that redirects to another host must not make the client
send the GitLab token there (python-gitlab's TokenAuth sets PRIVATE-TOKEN, a header
requests' rebuild_auth does not strip on a host change: it strips only Authorization).
A compromised or misconfigured GitLab front (or anything that can inject a 30x) would
then harvest the bot's token."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gitlab" / "client"))


from gitlab_client_support import PROJECT, TOKEN
from http_backend_support import Answer, RecordingServer

from workqueue.gitlab import GitLabClient


@pytest.fixture
def servers() -> Iterator[tuple[RecordingServer, RecordingServer]]:
    gitlab, elsewhere = RecordingServer().start(), RecordingServer().start()
    try:
        yield gitlab, elsewhere
    finally:
        gitlab.stop()
        elsewhere.stop()


def test_a_redirect_to_another_host_does_not_carry_the_token(servers):
    gitlab, elsewhere = servers
    # Another host: same address, other name (and port), as requests compares them.
    other = elsewhere.url.replace("127.0.0.1", "localhost")

    def redirect(request: Any) -> Answer:
        return Answer(status=302, headers={"Location": other + request.target}, body=b"")

    gitlab.respond = redirect
    with GitLabClient(gitlab.url, TOKEN, timeout=5) as client, contextlib.suppress(Exception):
        client.merge_request(PROJECT, 3)

    assert len(gitlab.received) == 1
    sent = [{k.lower(): v for k, v in r.headers} for r in elsewhere.received]
    # Fails: the other host received PRIVATE-TOKEN: glpat-SeCrEt-token-4711.
    assert [headers.get("private-token") for headers in sent] == [None] * len(sent)
