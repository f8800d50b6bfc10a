"""The `agent` type's four steps: placeholder, agent call, changes, reply.

Each is one step of the engine (its own transaction), so a crash between two
repeats at most the step it was in, and each step is safe to repeat:

* `post_placeholder` first looks for a note of the service carrying this
  task's marker in the thread (a placeholder posted by a step that did not
  commit) and adopts it; only then does it post one.
* `call_agent` may call the agent twice after a crash; the agent computes,
  it writes nothing. Timeouts, connection errors and 5xx answers wait
  `retry_initial_seconds`, doubled each time, without using the engine's
  attempts; after `max_attempts` calls the task fails with a reply saying so.
* `apply_changes` submits through the `mr` type's own `submit_mr`, whose live
  key makes a repeat an `unchanged` resubmission.
* `post_reply` edits the placeholder: editing twice writes the same text.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import cast

from sqlalchemy.orm import Session

from workqueue.gitlab.client import GitLabClient
from workqueue.queue import (
    DimensionStatus,
    DimensionUpdate,
    ExecutionContext,
    Phase,
    TypeRegistry,
    enqueue,
)
from workqueue.types.agent import replies, repository
from workqueue.types.agent.agent_call import AgentClient, AgentRefused, AgentUnavailable, task_body
from workqueue.types.agent.changes import ChangesRefused, submit_changes
from workqueue.types.agent.config import DEVELOPER, MAINTAINER, AgentTypeConfig
from workqueue.types.agent.models import AgentDimension, AgentState, AgentWorkItem
from workqueue.types.mr.validation.content_rules import redact_secrets

logger = logging.getLogger(__name__)

POST_PLACEHOLDER = "post_placeholder"
CALL_AGENT = "call_agent"
APPLY_CHANGES = "apply_changes"
POST_REPLY = "post_reply"


class AgentExecutors:
    def __init__(
        self,
        gitlab: GitLabClient,
        config: AgentTypeConfig,
        agent: AgentClient,
        registry: TypeRegistry,
    ) -> None:
        self._gitlab = gitlab
        self._config = config
        self._agent = agent
        self._registry = registry

    # -- placeholder ---------------------------------------------------------------------

    def post_placeholder(self, context: ExecutionContext) -> None:
        item = cast("AgentWorkItem", context.item)
        if item.reply_note_id is None:
            item.reply_note_id = self._own_note(item) or self._post(
                item, replies.placeholder(item.id, self._item_url(item))
            )
            context.audit("agent_placeholder", note_id=item.reply_note_id)
        item.state = AgentState.CALLING
        context.set_dimension(AgentDimension.NEEDS_PLACEHOLDER, DimensionStatus.FALSE)

    # -- the agent -----------------------------------------------------------------------

    def call_agent(self, context: ExecutionContext) -> None:
        item = cast("AgentWorkItem", context.item)
        turns = repository.history(context.session, item, limit=self._config.history_turns)
        item.agent_calls += 1
        try:
            answer = self._agent.call(task_body(item, turns))
        except AgentUnavailable as error:
            context.audit("agent_call_failed", reason=str(error), calls=item.agent_calls)
            if item.agent_calls < self._config.max_attempts:
                delay = self._config.retry_initial_seconds * 2 ** (item.agent_calls - 1)
                context.defer(AgentDimension.NEEDS_AGENT, timedelta(seconds=min(delay, 3600)))
                return
            self._give_up(context, item, f"{error} ({item.agent_calls} calls)")
            return
        except AgentRefused as error:
            context.audit("agent_call_failed", reason=str(error), calls=item.agent_calls)
            self._give_up(context, item, str(error))
            return
        context.audit("agent_answered", calls=item.agent_calls, changes=answer.changes is not None)
        # Kept redacted: readers of the project see it in the task's details.
        item.reply = redact_secrets(answer.reply)
        item.changes = answer.changes.model_dump() if answer.changes is not None else None
        context.set_dimension(AgentDimension.NEEDS_AGENT, DimensionStatus.FALSE)
        context.set_dimension(
            AgentDimension.NEEDS_CHANGES,
            DimensionStatus.TRUE if item.changes else DimensionStatus.FALSE,
        )
        context.set_dimension(AgentDimension.NEEDS_REPLY, DimensionStatus.TRUE)

    def _give_up(self, context: ExecutionContext, item: AgentWorkItem, why: str) -> None:
        item.state = AgentState.FAILED
        context.set_dimension(AgentDimension.NEEDS_AGENT, DimensionStatus.FALSE)
        context.set_dimension(AgentDimension.NEEDS_CHANGES, DimensionStatus.FALSE)
        context.set_dimension(AgentDimension.NEEDS_REPLY, DimensionStatus.TRUE)
        item.changes_refused = None
        context.audit("agent_gave_up", reason=why)
        item.reason = why

    # -- changes -------------------------------------------------------------------------

    def apply_changes(self, context: ExecutionContext) -> None:
        item = cast("AgentWorkItem", context.item)
        if item.changes and item.mr_item_id is None:
            try:
                result = submit_changes(
                    context.session,
                    self._registry,
                    item,
                    lambda target: self._merge_level(item, target),
                )
            except ChangesRefused as refusal:
                item.changes_refused = str(refusal)
                context.audit("agent_changes_refused", reason=str(refusal))
            else:
                item.mr_item_id = result.item.id
                context.audit(
                    "agent_changes_submitted",
                    mr_item_id=str(result.item.id),
                    outcome=str(result.outcome),
                )
        context.set_dimension(AgentDimension.NEEDS_CHANGES, DimensionStatus.FALSE)

    # -- the reply -----------------------------------------------------------------------

    def post_reply(self, context: ExecutionContext) -> None:
        item = cast("AgentWorkItem", context.item)
        text = self._reply_text(item)
        if item.reply_note_id is None:
            item.reply_note_id = self._own_note(item) or self._post(item, text)
        else:
            self._gitlab.edit_note(
                item.project_id, item.noteable_type, item.noteable_iid, item.reply_note_id, text
            )
        context.set_dimension(AgentDimension.NEEDS_REPLY, DimensionStatus.FALSE)
        context.audit("agent_replied", note_id=item.reply_note_id, state=str(item.state))
        if item.state is AgentState.FAILED:
            context.fail(item.reason or "the agent gave no usable answer")
            return
        if item.state is not AgentState.RATE_LIMITED:
            item.state = AgentState.REPLIED
        context.set_phase(Phase.COMPLETED, f"replied in the thread ({item.state})")

    def _reply_text(self, item: AgentWorkItem) -> str:
        if item.state is AgentState.RATE_LIMITED:
            return replies.rate_limited_text(item.id, item.reason or "over the rate limit")
        if item.state is AgentState.FAILED:
            return replies.failed_text(item.id, item.reason or "no usable answer")
        if item.changes_refused is not None:
            return replies.refused_text(
                item.id, item.changes_refused, reply=item.reply, project=item.project
            )
        mr_line = None
        if item.mr_item_id is not None:
            url = self._item_url_of(item.mr_item_id)
            mr_line = f"Changes: [merge request item]({url})" if url else "Changes: submitted."
        return replies.reply_text(item.id, item.reply or "", item.project, mr_line=mr_line)

    # -- retry and failure ------------------------------------------------------------

    def retry(self, session: Session, item: AgentWorkItem) -> None:
        """Retry hook (`POST …/retry`): ask the agent again from the start; the answer
        replaces the old one in the same note. A rate-limited task becomes a task. No
        GitLab call here: the steps make them."""
        item.state = AgentState.QUEUED if item.reply_note_id is None else AgentState.CALLING
        item.agent_calls = 0
        item.reason = None
        item.reply = None
        item.changes = None
        item.changes_refused = None
        session.flush()
        for dimension in AgentDimension:
            enqueue.upsert_dimension(
                session, item.id, DimensionUpdate(dimension, DimensionStatus.TRUE)
            )

    # -- when the engine gives up ------------------------------------------------------

    def failed(self, _session: object, item: AgentWorkItem, message: str) -> None:
        """Failure hook: the engine failed the task (a step kept failing). The thread is
        told, if GitLab takes it now; the task ends `failed` either way."""
        item.state = AgentState.FAILED
        item.reason = item.reason or message
        try:
            text = replies.failed_text(item.id, item.reason)
            if item.reply_note_id is not None:
                self._gitlab.edit_note(
                    item.project_id, item.noteable_type, item.noteable_iid, item.reply_note_id, text
                )
            else:
                item.reply_note_id = self._own_note(item) or self._post(item, text)
        except Exception:  # the thread keeps its placeholder: GitLab is what failed
            logger.warning("agent task %s failed; its thread could not be told", item.id)

    # -- GitLab --------------------------------------------------------------------------

    def _merge_level(self, item: AgentWorkItem, target: str | None) -> int:
        """The access needed to merge into `target` (None: the default branch) as GitLab
        protects it now; a branch GitLab does not show counts as Maintainers only."""
        name = target or self._gitlab.project(item.project_id).default_branch
        branch = self._gitlab.branch(item.project_id, name) if name else None
        if branch is None:
            return MAINTAINER
        # Unprotected: any Developer may merge. Protected: as its rule says (a rule that
        # names people, or no one, counts as Maintainers: the service cannot tell).
        may = not branch.protected or branch.developers_can_merge
        return DEVELOPER if may else MAINTAINER

    def _own_note(self, item: AgentWorkItem) -> int | None:
        """The service's note carrying this task's marker in the thread, if one exists."""
        bot = self._gitlab.current_user().username
        if item.discussion_id is not None:
            notes = self._gitlab.thread_notes(
                item.project_id, item.noteable_type, item.noteable_iid, item.discussion_id
            )
        else:
            notes = self._gitlab.noteable_notes(
                item.project_id, item.noteable_type, item.noteable_iid
            )
        for note in notes:
            if note.author == bot and replies.marked_task(note.body) == item.id:
                return note.id
        return None

    def _post(self, item: AgentWorkItem, body: str) -> int:
        if item.discussion_id is not None:
            return self._gitlab.reply_in_thread(
                item.project_id, item.noteable_type, item.noteable_iid, item.discussion_id, body
            )
        return self._gitlab.create_note(
            item.project_id, item.noteable_type, item.noteable_iid, body, internal=item.internal
        )

    def _item_url(self, item: AgentWorkItem) -> str | None:
        return self._item_url_of(item.id)

    def _item_url_of(self, item_id: object) -> str | None:
        base = self._config.dashboard_url
        return f"{base}/ui/items/{item_id}" if base else None
