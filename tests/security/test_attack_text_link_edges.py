"""Attack (fixed): references to another project that the text rules let through.

A caller scoped to `team/app` wrote, in a description or commit message:

- a link whose scheme follows a digit or `.`, `-`, `+` (`1https://…/victim/prod/-/issues/2`).
  GitLab's autolinker (comrak, like cmark-gfm) reads the scheme as the run of
  letters right before `://`, so it links `https://…` there, and the link to
  another project's issue becomes a reference ("mentioned in" over there).
  The rule only took a scheme at a word start, so the URL was neither masked
  nor judged, and its `/-/issues/` path was preceded by a host character;
- a link to one of the project's own issues followed by more path
  (`…/team/app/-/issues/1/Victim/prod!2`): GitLab's link pattern takes
  `…/issues/1/` and leaves `Victim/prod!2` as text for the filters that run
  after it (merge requests, commits); the closing scan reads it as the next
  issue of `Closes …`. The rule blanked the whole link as the project's own;
- a commit of another project followed by `.x` or `-` (`victim/prod@abc1234.txt`):
  GitLab's commit pattern has no such exclusion. The rule left it alone as if
  it were an e-mail address, which a `/` in the name rules out; nor did it
  see a SHA-256 commit id (64 digits) or an extensible reference of a kind
  other than issue, work item, merge request and epic.

Each now answers 422 on the field with no GitLab write; the project's own
links, e-mail addresses and links with a benign tail still pass.
"""

from __future__ import annotations

import pytest
from api_harness import build_client
from scoping_support import OWN, ci_job, scoped_rules, submission

HOST = "https://gitlab.example.com"

ATTACKS = [
    f"see 1{HOST}/victim/prod/-/issues/2",
    f"see.{HOST}/victim/prod/-/merge_requests/2",
    f"x-{HOST}/victim/prod/-/issues/2",
    f"{HOST}/team/app/-/issues/1/Victim/prod!2",
    f"Closes {HOST}/team/app/-/issues/1/Victim/prod#2",
    f"{HOST}/team/app/-/merge_requests/1/~/victim/prod@abc1234",
    "reverts victim/prod@abc1234.txt",
    "reverts victim/prod@abc1234-fix",
    "reverts victim/prod@" + "ab" * 32,  # a SHA-256 id
    "[vulnerability:victim/prod/5]",
]

ALLOWED = [
    f"Closes {HOST}/team/app/-/issues/1#note_5 and {HOST}/team/app/-/merge_requests/3/diffs",
    "mail dev@cafe1234.example or bot@example.com",
    f"see {HOST}/team/app/-/commit/abc1234?view=parallel",
]


@pytest.fixture
def client(database_url, simulator, issuer, projects):
    del projects
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        handled_types={"mr": {"gitlab_url": simulator.url}},
    ) as client:
        yield client


@pytest.mark.parametrize("text", ATTACKS)
def test_a_reference_gitlab_reads_is_refused_with_no_write(client, simulator, issuer, key, text):
    writes_before = len(simulator.log.writes())
    answer = client.post(
        "/api/work-items/mr",
        json=submission(OWN, "workqueue/edge", description=text, commit_message=text),
        headers=ci_job(issuer, key),
    )
    assert answer.status_code == 422, answer.text
    errors = {tuple(error["loc"]): error["type"] for error in answer.json()["detail"]}
    assert errors == {
        ("body", "description"): "cross_project_reference",
        ("body", "commit_message"): "cross_project_reference",
    }
    assert len(simulator.log.writes()) == writes_before


@pytest.mark.parametrize("text", ALLOWED)
def test_own_links_and_addresses_still_pass(client, issuer, key, text):
    answer = client.post(
        "/api/work-items/mr",
        json=submission(OWN, "workqueue/edge", description=text, commit_message=text),
        headers=ci_job(issuer, key),
    )
    assert answer.status_code == 201, answer.text
