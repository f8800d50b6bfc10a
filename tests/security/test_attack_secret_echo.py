"""Attack (fixed): a secret the content rules refuse came back quoted by another rule.

The secrets rule names file, line and kind and never the secret, because a 422 may
end up in a CI job's log that the whole project can read. But the other rules quote
what they refuse: a clone URL with an embedded token that names another project's
issue (`https://oauth2:<token>@gitlab…/victim/prod/-/issues/1`, the way agents paste
URLs), an `@`-mention, a blocked, duplicate or malformed path or branch. Each of their
messages carried the token whole, right beside the secrets rule's careful 422.
"""

from __future__ import annotations

import random
import string
from typing import Any

import httpx
import pytest
from api_harness import build_client
from scoping_support import OWN, VICTIM, ci_job, scoped_rules, submission

# Built at run time, so that no scanner finds a secret in this file.
_RANDOM = random.Random(2104)  # noqa: S311 - a reproducible fixture, not a key
TOKEN = "glpat" + "-" + "".join(_RANDOM.choice(string.ascii_letters) for _ in range(20))


def _create(path: str, content: str = "x\n") -> dict[str, Any]:
    return {"action": "create", "file_path": path, "content": content}


CASES = [
    pytest.param(
        {"description": f"See https://oauth2:{TOKEN}@gitlab.example.com/{VICTIM}/-/issues/1"},
        ["body", "description"],
        "cross_project_reference",
        id="url-with-token-in-description",
    ),
    pytest.param(
        {
            "commit_message": f"Fix it\n\nCloses https://gitlab.example.com/{VICTIM}/-/issues/2"
            f"?private_token={TOKEN}"
        },
        ["body", "commit_message"],
        "cross_project_reference",
        id="token-in-closing-url",
    ),
    pytest.param(
        # A quoted URL is cut at 120 characters: here inside the token, whose first half
        # no detector would recognise any more.
        {
            "description": f"See https://gitlab.example.com/{VICTIM}/-/issues/3?page={'1' * 35}"
            f"&private_token={TOKEN}"
        },
        ["body", "description"],
        "cross_project_reference",
        id="token-cut-by-the-quote",
    ),
    pytest.param(
        {"description": f"Ask @{TOKEN}"},
        ["body", "description"],
        "mention",
        id="mention",
    ),
    pytest.param(
        {"file_actions": [_create(f".gitlab/{TOKEN}.yml")]},
        ["body", "file_actions", 0, "file_path"],
        "path_blocked",
        id="blocked-path",
    ),
    pytest.param(
        {"file_actions": [_create(f"notes/{TOKEN}.md"), _create(f"notes/{TOKEN}.md", "y\n")]},
        ["body", "file_actions", 1, "file_path"],
        "duplicate_path",
        id="duplicate-path",
    ),
    pytest.param(
        {"source_branch": f"workqueue/{TOKEN}.lock"},
        ["body", "source_branch"],
        "invalid_branch",
        id="malformed-branch",
    ),
]


@pytest.mark.parametrize(("fields", "loc", "kind"), CASES)
def test_no_rule_quotes_a_secret_in_its_422(
    database_url, simulator, issuer, key, projects, fields, loc, kind
):
    del projects
    job = ci_job(issuer, key)
    body = submission(OWN, **fields)
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        handled_types={"mr": {"gitlab_url": simulator.url}},
    ) as client:
        writes_before = len(simulator.log.writes())
        answer: httpx.Response = client.post("/api/work-items/mr", json=body, headers=job)
        assert answer.status_code == 422, answer.text
        errors = answer.json()["detail"]
        # The rule still answers, on its field, and says why...
        assert [loc, kind] in [[error["loc"], error["type"]] for error in errors], errors
        # ...but the token is nowhere in the answer.
        assert TOKEN not in answer.text
        assert TOKEN[len("glpat-") : len("glpat-") + 8] not in answer.text
        assert len(simulator.log.writes()) == writes_before
