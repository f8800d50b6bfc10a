"""What an `mr` submission makes the service store, in bytes (`max_stored_bytes_per_caller`).

An item counts the UTF-8 bytes of every text its caller sends to be kept:

| text                                        | counted | after `retention.content_days` |
|---------------------------------------------|---------|--------------------------------|
| `title`, `labels` (each as given)           | yes     | kept                           |
| `package`, `change_kind`                    | yes     | kept                           |
| each action's `file_path`, `previous_path`  | yes     | kept                           |
| `description`, `commit_message`             | yes     | dropped (on the MR and commit) |
| each action's `content` (base64 as sent)    | yes     | dropped (size, sha256 kept)    |
| `project`, `source_branch`, `target_branch` | no      | kept                           |

The project and branches are not counted: they say where the change goes, are
bounded by the path and branch rules, and the service fills an omitted target
itself. Labels count each as given, duplicates too: they are stored as given.
`types.mr.repository` computes the kept part again in SQL for the drop; an
integration test holds the two equal.
"""

from __future__ import annotations

from collections.abc import Iterable

from workqueue.types.mr.schemas import MoveAction, MRWorkItemCreate


def stored_bytes(submission: MRWorkItemCreate) -> int:
    """Bytes the submission's item holds as stored: `WorkItem.content_bytes`."""
    return bytes_kept(submission) + bytes_dropped_by_retention(submission)


def bytes_kept(submission: MRWorkItemCreate) -> int:
    """Bytes the item still holds once retention dropped what it drops."""
    paths = (
        path
        for action in submission.file_actions
        for path in (
            action.file_path,
            action.previous_path if isinstance(action, MoveAction) else None,
        )
    )
    return _utf8_total(
        [submission.title, *submission.labels, submission.package, submission.change_kind, *paths]
    )


def bytes_dropped_by_retention(submission: MRWorkItemCreate) -> int:
    """Bytes retention drops from a finished item: description, commit message, contents."""
    contents = (getattr(action, "content", None) for action in submission.file_actions)
    return _utf8_total([submission.description, submission.commit_message, *contents])


def _utf8_total(texts: Iterable[str | None]) -> int:
    # surrogatepass: a length must never raise; the policy reports invalid text.
    return sum(len(text.encode("utf-8", "surrogatepass")) for text in texts if text is not None)
