"""`status` as a list: one line per item that fits an 80-column terminal.

The compact form shortens what only identifies (the id to 8 characters, like
git's short hashes) and cuts long values with an ellipsis instead of wrapping
them, so every item stays on one line; `--wide` shows every value in full,
folded when the terminal is narrow. Scripts use `--json`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from workqueue.cli.client_render import phase_text

SHORT_ID = 8
SHORT_SHA = 8
HEADINGS = ("id", "type", "phase", "project", "branch", "MR", "age", "error / blocker")
# The columns that give way on a narrow terminal, and their shares of what is left.
FLEXIBLE = {"project": 3, "branch": 3, "error / blocker": 4}
MIN_FLEXIBLE = 6
COLUMN_GAP = 2  # padding and separator


def list_view(
    items: Sequence[Mapping[str, Any]],
    *,
    width: int = 80,
    wide: bool = False,
    now: datetime | None = None,
) -> Table:
    """The items in the order given, fitting `width` columns unless `wide`; `now` fixes ages."""
    moment = now or datetime.now(UTC)
    rows = [_row(item, moment, wide=wide) for item in items]
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False)
    if wide:
        for heading in HEADINGS:
            table.add_column(heading, overflow="fold")
    else:
        needed = [
            max(len(heading), *(row[index].cell_len for row in rows))
            for index, heading in enumerate(HEADINGS)
        ]
        widths = _fit(needed, width)
        for heading, column_width in zip(HEADINGS, widths, strict=True):
            # Each column is sized here: a long value ends in "…" on its one line.
            table.add_column(heading, width=column_width, no_wrap=True, overflow="ellipsis")
        for index in (HEADINGS.index("project"), HEADINGS.index("branch")):
            for row in rows:
                row[index] = _keep_tail(row[index], widths[index])
    for row in rows:
        table.add_row(*row)
    return table


def _fit(needed: list[int], width: int) -> list[int]:
    """Column widths: fixed columns as needed, the flexible ones share what is left."""
    flexible = [index for index, heading in enumerate(HEADINGS) if heading in FLEXIBLE]
    fixed = sum(value for index, value in enumerate(needed) if index not in flexible)
    left = width - fixed - COLUMN_GAP * (len(HEADINGS) - 1)
    widths = list(needed)
    pending = list(flexible)
    # Water-filling: a column that needs less than its share keeps only what it needs.
    while pending:
        shares = sum(FLEXIBLE[HEADINGS[index]] for index in pending)
        fair = {index: left * FLEXIBLE[HEADINGS[index]] // shares for index in pending}
        modest = [index for index in pending if needed[index] <= fair[index]]
        if not modest:
            for index in pending:
                widths[index] = max(MIN_FLEXIBLE, fair[index])
            widths[pending[-1]] += max(0, left - sum(fair.values()))  # the rounding remainder
            break
        for index in modest:
            left -= needed[index]
            pending.remove(index)
    return widths


def _keep_tail(text: Text, width: int) -> Text:
    """`…/kernel-tools`: the end of a path tells items apart, its common start does not."""
    if text.cell_len <= width or width < 2:
        return text
    return Text("…" + text.plain[len(text.plain) - width + 1 :], style=text.style)


def _row(item: Mapping[str, Any], now: datetime, *, wide: bool) -> list[Text]:
    details = item.get("details") or {}
    project, branch = _subject(details)
    item_id = str(item.get("id", ""))
    return [
        Text(item_id if wide else item_id[:SHORT_ID]),
        Text(str(item.get("item_type", ""))),
        phase_text(item.get("phase")),
        Text(project),
        Text(branch),
        Text(_reference(details, wide=wide)),
        Text(age(item.get("created_at"), now)),
        _note(item, details, wide=wide),
    ]


def _subject(details: Mapping[str, Any]) -> tuple[str, str]:
    """(project, branch): an MR's source branch, or the branch a trunk queue follows."""
    project = details.get("project")
    branch = details.get("source_branch") or details.get("branch")
    queue = details.get("queue")
    if isinstance(queue, str) and ":" in queue and not (project and branch):
        queue_project, _, queue_branch = queue.rpartition(":")
        project, branch = project or queue_project, branch or queue_branch
    return str(project or ""), str(branch or "")


def _reference(details: Mapping[str, Any], *, wide: bool) -> str:
    """`!iid` of an MR (its URL when wide), else the commit an item is about."""
    if wide and details.get("mr_url"):
        return str(details["mr_url"])
    if details.get("mr_iid") is not None:
        return f"!{details['mr_iid']}"
    if details.get("noteable_iid") is not None:  # an agent task: the thread it answers
        if wide and details.get("note_url"):
            return str(details["note_url"])
        sigil = "!" if details.get("noteable_type") == "merge_request" else "#"
        return f"{sigil}{details['noteable_iid']}"
    sha = details.get("sha")
    if isinstance(sha, str) and sha:
        return sha if wide else sha[:SHORT_SHA]
    return ""


# Blockers a person chose: the service waits on purpose (as the dashboard tells them apart).
HOLD_CODES = frozenset({"auto_merge_disabled", "draft"})


def _note(item: Mapping[str, Any], details: Mapping[str, Any], *, wide: bool) -> Text:
    """Why it is where it is: the error, else what blocks the merge, else how it ended."""
    error = item.get("error")
    if error and item.get("phase") == "failed":
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return Text(str(error) if wide else first_line, style="red")
    blocker = details.get("merge_blocker")
    if item.get("phase") == "active" and isinstance(blocker, Mapping) and blocker.get("code"):
        text = str(blocker["code"])
        if wide and blocker.get("message"):
            text += f": {blocker['message']}"
        # A hold a person chose reads apart from a blocker nobody chose, and from a failure.
        return Text(text, style="dim" if blocker["code"] in HOLD_CODES else "yellow")
    if details.get("completion_reason"):
        return Text(str(details["completion_reason"]), style="dim")
    if details.get("noteable_type") and details.get("state"):  # an agent task
        return Text(str(details["state"]), style="dim")
    return Text("")


def age(created_at: object, now: datetime) -> str:
    """`45s`, `12m`, `3h`, `6d`: how long ago, in its largest whole unit."""
    if not isinstance(created_at, str):
        return ""
    try:
        then = datetime.fromisoformat(created_at)
    except ValueError:
        return ""
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
