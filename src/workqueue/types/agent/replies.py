"""What the service posts in a thread: placeholders, the agent's reply, refusals. Pure.

The agent's text reaches GitLab as the service's user, so it is held to the
`mr` type's text rules, but a reply cannot be refused with a 422: it is
neutralised instead. A reply that would make GitLab act (a quick action line
such as `/merge`; an @-mention, `@all` included; a reference to another
project's issue, MR or commit, or any epic; in any reading the `mr` rules
look at: as written, as rendered, Unicode-normalised) is posted as an
indented code block under a one-line notice, where GitLab runs no quick
action, notifies nobody and links nothing. An indented block, not a fence: a
reply holding its own fence line could end a fenced block early. Secrets the
`mr` type's detectors find are redacted first, in every reply.

Every note the service writes carries a marker naming the task
(`<!-- workqueue-task:<id> -->`), so a placeholder whose step did not commit
(a crash between GitLab's answer and the commit) is found and adopted, never
posted twice.
"""

from __future__ import annotations

import re
import unicodedata
import uuid

from workqueue.types.mr.validation.content_rules import redact_secrets
from workqueue.types.mr.validation.text_rules import written_elsewhere

MARKER = "<!-- workqueue-task:{task_id} -->"
_MARKER = re.compile(r"<!-- workqueue-task:([0-9a-f-]{36}) -->")
# GitLab's quick action extractor reads `/command` at the start of a line.
_QUICK_ACTION = re.compile(r"^\s*/[A-Za-z]", re.MULTILINE)
_BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
# GitLab's note limit is 1,000,000 characters; a reply that long is no reply.
MAX_REPLY_CHARS = 100_000
NEUTRALISED_NOTICE = (
    "_The agent's reply is shown as code: it mentions people, points at other projects "
    "or holds quick actions, which the service does not post in its own name._"
)


def marker(task_id: uuid.UUID) -> str:
    return MARKER.format(task_id=task_id)


def marked_task(body: str) -> uuid.UUID | None:
    """The task a note of the service's names, or None."""
    found = _MARKER.search(body)
    return uuid.UUID(found.group(1)) if found else None


def placeholder(task_id: uuid.UUID, item_url: str | None) -> str:
    link = f" ([follow it]({item_url}))" if item_url else ""
    return f"{marker(task_id)}\n⏳ Working on it{link}."


def reply_text(task_id: uuid.UUID, reply: str, project: str, *, mr_line: str | None) -> str:
    """The agent's reply as posted: secrets redacted, neutralised if GitLab would act on
    it, the marker first and the link to the MR item last."""
    text = redact_secrets(reply)[:MAX_REPLY_CHARS]
    if would_act(text, project):
        text = f"{NEUTRALISED_NOTICE}\n\n" + _indented(text)
    parts = [marker(task_id), text]
    if mr_line:
        parts.append(mr_line)
    return "\n\n".join(parts)


def failed_text(task_id: uuid.UUID, why: str) -> str:
    return f"{marker(task_id)}\n❌ The agent could not answer: {_plain(why)}"


def refused_text(task_id: uuid.UUID, why: str, *, reply: str | None, project: str) -> str:
    """The agent's changes were refused (the `mr` rules): say why, and still show the
    reply."""
    body = f"{marker(task_id)}\n⚠️ The agent's changes were not applied: {_plain(why)}"
    if reply:
        shown = redact_secrets(reply)[:MAX_REPLY_CHARS]
        body += "\n\n" + (
            f"{NEUTRALISED_NOTICE}\n\n{_indented(shown)}" if would_act(shown, project) else shown
        )
    return body


def rate_limited_text(task_id: uuid.UUID, which: str) -> str:
    return (
        f"{marker(task_id)}\n⏸️ Not now: {which}. Further requests in this hour get no "
        "answer; try again later."
    )


def would_act(text: str, project: str) -> bool:
    """Whether GitLab would run a quick action, notify someone or link another project
    for `text` posted in `project`."""
    if written_elsewhere(text, project):
        return True
    rendered = _BACKSLASH_ESCAPE.sub(r"\1", text)
    normalised = unicodedata.normalize("NFKC", text)
    return any(_QUICK_ACTION.search(view) for view in (text, rendered, normalised))


def _indented(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    "


def _plain(text: str) -> str:
    """One line of the service's own words about an error, inert: GitLab acts on none of
    it (an error may quote what the agent sent)."""
    line = " ".join(text.split())[:500].replace("`", "'")
    return f"`{line}`"
