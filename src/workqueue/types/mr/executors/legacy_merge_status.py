"""An MR answer without `detailed_merge_status` (GitLab before 15.6), read as one. Pure.

GitLab 15.6 added `detailed_merge_status`; older answers say only
`merge_status` (git mergeability, computed asynchronously), `draft`,
`has_conflicts` and `blocking_discussions_resolved`. `merge_blockers` judges an
MR by its detailed status, so such an answer is first given the status those
fields mean:

| the answer says                                         | read as                    |
|---------------------------------------------------------|----------------------------|
| no `merge_status` either                                | nothing (None: not judged) |
| `draft`                                                 | `draft_status`             |
| `merge_status` unchecked / checking / ..._recheck(ing)  | `checking` (settles)       |
| `has_conflicts`, or `merge_status` cannot_be_merged     | `conflict`                 |
| `blocking_discussions_resolved` false                   | `discussions_not_resolved` |
| `merge_status` can_be_merged                            | `mergeable`                |
| any other `merge_status`                                | nothing                    |

"mergeable" here says nothing about CI or approvals: the head pipeline is
still checked on its own, and a merge GitLab refuses for a missing approval is
a refusal like any other.
"""

from __future__ import annotations

from workqueue.gitlab.models import MergeRequestInfo

_STILL_CHECKING = frozenset(
    {"unchecked", "checking", "cannot_be_merged_recheck", "cannot_be_merged_rechecking"}
)


def legacy_merge_status(merge_request: MergeRequestInfo) -> str | None:
    """The `detailed_merge_status` an answer without one amounts to (see the module doc)."""
    status = merge_request.merge_status
    if status is None:
        return None
    readings = (  # in the table's order: the first that applies
        (merge_request.draft, "draft_status"),
        (status in _STILL_CHECKING, "checking"),
        (merge_request.has_conflicts or status == "cannot_be_merged", "conflict"),
        (not merge_request.blocking_discussions_resolved, "discussions_not_resolved"),
        (status == "can_be_merged", "mergeable"),
    )
    return next((reading for applies, reading in readings if applies), None)
