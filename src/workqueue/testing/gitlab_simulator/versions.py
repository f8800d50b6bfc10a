"""Which GitLab version the simulator plays, and the shapes that differ by version.

`GitLabSimulator(gitlab_version="15.11")` changes only what real GitLab
versions are known to send differently; everything else is the current shape.
Each rule names where the difference was seen:

| shape                                              | versions    | seen in                    |
|----------------------------------------------------|-------------|----------------------------|
| MR answers and hooks without `detailed_merge_status`| before 15.6 | GitLab's API docs (field   |
|   (only `merge_status`, `has_conflicts`, `draft`,   |             | added in 15.6); captured   |
|   `blocking_discussions_resolved`)                  |             | drone/jx MR hooks lack it  |
| Job Hooks without the `project` object (only        | before 16.0 | go-gitlab's job.json and   |
|   `project_id`, `project_name`, `repository`) and   |             | zulip's build fixture      |
|   without the `build_*_at_iso` times                |             | (15.x, 2023-01)            |

The version boundaries are the first release we know sends the newer shape,
not a promise about every patch release in between. Shapes that are the same
in every captured version (MR, note, pipeline and job hook times written
`2025-03-01 10:00:00 UTC`; commit times with an offset) are not switched.
"""

from __future__ import annotations

import re

DEFAULT_GITLAB_VERSION = "17.6"
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$")

DETAILED_MERGE_STATUS_SINCE = (15, 6)
JOB_HOOK_PROJECT_SINCE = (16, 0)


def parse_version(version: str) -> tuple[int, int]:
    """`"17.6"`, `"15.11.2"` or `"16.0.0-ee"` as (major, minor); ValueError otherwise."""
    match = _VERSION.match(version.strip())
    if match is None:
        raise ValueError(f"not a GitLab version: {version!r} (expected e.g. '17.6' or '15.11.2')")
    return int(match[1]), int(match[2])


def full_version(version: str) -> str:
    """The version as GitLab's `User-Agent: GitLab/<version>` spells it (`17.6.0`)."""
    major, minor = parse_version(version)
    parts = version.strip().split("-", 1)[0].split("+", 1)[0].split(".")
    patch = parts[2] if len(parts) > 2 else "0"
    return f"{major}.{minor}.{patch}"


def has_detailed_merge_status(version: tuple[int, int]) -> bool:
    return version >= DETAILED_MERGE_STATUS_SINCE


def job_hook_has_project(version: tuple[int, int]) -> bool:
    return version >= JOB_HOOK_PROJECT_SINCE
