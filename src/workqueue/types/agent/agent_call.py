"""The one call the service makes to the agent: `POST agent_url`, and what may come back.

The agent is compute only: it gets the note, the thread's earlier turns and a
task id, never a GitLab token, and answers `{"reply", "changes"}`. Its answer
is untrusted input like any caller's: a body that is not that shape is a
refusal (the task fails with the reason), and `changes` go through the `mr`
type's rules before anything reaches GitLab.

Timeouts, connection errors and 5xx answers are `AgentUnavailable` (the task
tries again later, up to `max_attempts`); any other answer is `AgentRefused`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workqueue.types.agent.models import AgentWorkItem
from workqueue.types.agent.repository import Turn

# The agent's reply and changes are kept on the task; a larger answer is no answer.
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class AgentUnavailable(Exception):  # noqa: N818 - a condition, not a bug
    """The agent did not answer now (timeout, connection, 5xx): try again later."""


class AgentRefused(Exception):  # noqa: N818
    """The agent answered, but not with a usable answer: the task fails."""


class Changes(BaseModel):
    """What the agent wants on a branch: an `mr` submission's own fields."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=1024)
    commit_message: str = Field(min_length=1, max_length=65536)
    description: str | None = Field(None, max_length=1_048_576)
    file_actions: list[dict[str, Any]] = Field(min_length=1)


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reply: str = Field(max_length=1_000_000)
    changes: Changes | None = None


def task_body(item: AgentWorkItem, turns: list[Turn]) -> dict[str, Any]:
    """The documented request body."""
    return {
        "task_id": str(item.id),
        "session_id": str(item.session_id),
        "project": item.project,
        "noteable": {"type": item.noteable_type, "iid": item.noteable_iid},
        "note": {"id": item.note_id, "author": item.author, "body": item.request},
        "history": [
            {
                "note": {"id": turn.note_id, "author": turn.author, "body": turn.request},
                "reply": turn.reply,
            }
            for turn in turns
        ],
    }


@dataclass(frozen=True)
class AgentClient:
    url: str
    token: str = field(repr=False)
    timeout_seconds: float = 900.0

    def call(self, body: Mapping[str, Any]) -> Answer:
        """One call, within `timeout_seconds` in all (an agent that drips its answer is
        cut off too), its answer read up to `MAX_ANSWER_BYTES`."""
        deadline = time.monotonic() + self.timeout_seconds
        try:
            with (
                httpx.Client(timeout=self.timeout_seconds, follow_redirects=False) as client,
                client.stream(
                    "POST",
                    self.url,
                    json=dict(body),
                    headers={"Authorization": f"Bearer {self.token}"},
                ) as response,
            ):
                if response.status_code >= 500:
                    raise AgentUnavailable(f"the agent answered {response.status_code}")
                if response.status_code != 200:
                    raise AgentRefused(f"the agent answered {response.status_code}")
                content = _read_within(response, deadline, self.timeout_seconds)
        except httpx.TimeoutException:
            raise AgentUnavailable(f"no answer within {self.timeout_seconds:g} s") from None
        except httpx.HTTPError as error:
            raise AgentUnavailable(f"cannot reach the agent: {type(error).__name__}") from None
        return parse_answer(content)


def _read_within(response: httpx.Response, deadline: float, timeout: float) -> bytes:
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise AgentRefused("the agent's answer is over 16 MiB")
        if time.monotonic() > deadline:
            raise AgentUnavailable(f"no answer within {timeout:g} s")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_answer(content: bytes) -> Answer:
    """The answer, or AgentRefused: not JSON, nested past reason, not `{reply, changes}`,
    or holding what no text column can keep (NUL characters, lone surrogates)."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        raise AgentRefused("the agent's answer is not JSON (or nested too deep)") from None
    if not _storable(data):
        raise AgentRefused("the agent's answer holds NUL characters or lone surrogates")
    try:
        return Answer.model_validate(data)
    except (ValidationError, RecursionError) as error:
        why = f"the agent's answer is not {{reply, changes}}: {_first(error)}"
        raise AgentRefused(why) from None


def _storable(data: Any, depth: int = 0) -> bool:
    if depth > 64:
        return False
    if isinstance(data, str):
        return "\x00" not in data and _encodes(data)
    if isinstance(data, dict):
        return all(_storable(k, depth) and _storable(v, depth + 1) for k, v in data.items())
    if isinstance(data, list):
        return all(_storable(v, depth + 1) for v in data)
    return True


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _first(error: Exception) -> str:
    if isinstance(error, ValidationError):
        problem = error.errors()[0]
        return f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
    return "not JSON"
