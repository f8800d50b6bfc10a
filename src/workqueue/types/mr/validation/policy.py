"""Validation policy of an `mr` submission, and its content hash.

Pure functions over a parsed `MRWorkItemCreate` and an `MRTypeConfig`: no I/O,
so the API can refuse a submission before any database write or GitLab call,
and the rules can be tested exhaustively as tables. Every violation carries a
FastAPI-style `loc` (`("body", "file_actions", 3, "file_path")`) and all
violations are reported at once, so a caller can fix a submission in one round.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import replace

from workqueue.project_patterns import path_matches, scope_regexes
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import (
    ChmodAction,
    CreateAction,
    FileAction,
    MoveAction,
    MRWorkItemCreate,
    UpdateAction,
)
from workqueue.types.mr.validation.content_rules import (
    FileContent,
    file_content_violations,
    published_texts,
    redact_secrets,
    text_secret_violations,
)
from workqueue.types.mr.validation.paths import (
    Problem,
    branch_problem,
    matching_glob,
    path_problem,
    project_problem,
)
from workqueue.types.mr.validation.text_rules import submission_text_violations
from workqueue.types.mr.validation.violations import Loc, Violation, ViolationKind

__all__ = [
    "Violation",
    "ViolationKind",
    "check_file_actions",
    "check_submission",
    "content_hash",
    "decode_content",
    "decoded_size",
    "quick_action_line",
]

_BODY: Loc = ("body",)
_ACTIONS: Loc = ("body", "file_actions")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Unicode category Cc: C0 controls, DEL and C1 controls.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# Line breaks and tabs are ordinary in commit messages and descriptions.
_CONTROL_MULTILINE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Files may hold any control character but NUL: text content is stored in
# PostgreSQL, which cannot hold NUL in text; binary content goes as base64.
_NUL = re.compile("\x00")
_LINE_BREAK = re.compile("\r\n|[\r\n\u2028\u2029]")


def check_submission(
    submission: MRWorkItemCreate, config: MRTypeConfig, *, project_path: str | None = None
) -> list[Violation]:
    """Every policy violation of `submission`; an empty list means it may be accepted.

    `project_path` is the project's canonical path once resolved: texts may
    name that project's own issues and MRs (`text_rules.py`).
    """
    found = [
        _project_violation(submission.project),
        *_branch_violations(submission, config),
        *_text_violations(submission, config),
    ]
    violations = [violation for violation in found if violation is not None]
    # A field already refused (too long, control characters) is not scanned.
    refused = frozenset(violation.loc for violation in violations)
    violations.extend(
        submission_text_violations(submission, config, project_path=project_path, refused=refused)
    )
    label_violations = _label_violations(submission.labels, config)
    action_violations = check_file_actions(submission.file_actions, config)
    violations.extend(label_violations)
    violations.extend(action_violations)
    # GitLab publishes texts and names as it does files: a secret there leaks the same way.
    unscanned = refused | {violation.loc for violation in (*label_violations, *action_violations)}
    violations.extend(
        text_secret_violations(published_texts(submission, skip=unscanned), config.content)
    )
    # Other rules quote what they refuse (a path, a branch, a URL): never a secret in it.
    return [
        violation
        if violation.kind == ViolationKind.SECRET
        else replace(violation, message=redact_secrets(violation.message))
        for violation in violations
    ]


def check_file_actions(actions: Sequence[FileAction], config: MRTypeConfig) -> list[Violation]:
    """Violations of the `file_actions` list: count, paths, content, sizes, duplicates."""
    violations: list[Violation] = []
    if not actions:
        violations.append(
            Violation(_ACTIONS, "at least one file action is required", ViolationKind.NO_ACTIONS)
        )
    elif len(actions) > config.max_actions:
        violations.append(
            Violation(
                _ACTIONS,
                f"at most {config.max_actions} file actions are allowed (got {len(actions)})",
                ViolationKind.TOO_MANY_ACTIONS,
            )
        )
    total = 0
    for index, action in enumerate(actions):
        action_violations, size = _action_violations(index, action, config)
        violations.extend(action_violations)
        total += size
    violations.extend(_duplicate_path_violations(actions))
    if total > config.max_total_bytes:
        violations.append(
            Violation(
                _ACTIONS,
                f"file contents total {total} bytes after decoding; "
                f"the limit is {config.max_total_bytes}",
                ViolationKind.TOO_LARGE,
            )
        )
    else:
        # Content rules read only what the rules above accept, never more than the limit.
        violations.extend(
            file_content_violations(_accepted_contents(actions, violations), config.content)
        )
    return violations


def _accepted_contents(
    actions: Sequence[FileAction], violations: Sequence[Violation]
) -> list[FileContent]:
    refused = {violation.loc for violation in violations}
    contents: list[FileContent] = []
    for index, action in enumerate(actions):
        if (*_ACTIONS, index, "content") in refused:
            continue
        content = decode_content(action)  # undecodable content is refused above
        if content is not None:
            contents.append(FileContent(index, action.file_path, content))
    return contents


def decode_content(action: FileAction) -> bytes | None:
    """The bytes `action` writes, or None when it writes no content.

    Raises ValueError for base64 that is not canonical RFC 4648 (standard
    alphabet, '=' padding, no whitespace) and for text that is not valid
    Unicode. Canonical-only decoding means one content has one spelling.
    """
    if not isinstance(action, CreateAction | UpdateAction | MoveAction) or action.content is None:
        return None
    if action.encoding == "text":
        return action.content.encode("utf-8")
    encoded = action.content.encode("ascii")
    decoded = binascii.a2b_base64(encoded, strict_mode=True)
    if binascii.b2a_base64(decoded, newline=False) != encoded:
        raise ValueError("base64 is not in canonical form")
    return decoded


def decoded_size(action: FileAction) -> int:
    """Bytes written by `action` (0 when it carries no content); ValueError as decode_content."""
    content = decode_content(action)
    return 0 if content is None else len(content)


def content_hash(submission: MRWorkItemCreate) -> str:
    """`sha256:<hex>` of what the submission asks GitLab to hold, for upsert comparison.

    Covers exactly target_branch, title, description, commit_message, labels,
    auto_merge and file_actions. Labels count as a set (sorted, deduplicated):
    GitLab keeps an MR's labels unordered, so reordering them is no change.
    The order of file actions is kept: it is the order GitLab applies them.
    Content is hashed after decoding, so the same bytes sent as text or as
    base64 are the same content. Expects a submission the policy accepted;
    undecodable content raises ValueError.
    """
    document = {
        "target_branch": submission.target_branch,
        "title": submission.title,
        "description": submission.description,
        "commit_message": submission.commit_message,
        "labels": sorted(set(submission.labels)),
        "auto_merge": submission.auto_merge,
        "file_actions": [_canonical_action(action) for action in submission.file_actions],
    }
    # ensure_ascii escapes everything outside ASCII, so the bytes are defined
    # even for strings no UTF-8 encoder would accept.
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _canonical_action(action: FileAction) -> dict[str, object]:
    canonical: dict[str, object] = {"action": action.action, "file_path": action.file_path}
    if isinstance(action, MoveAction):
        canonical["previous_path"] = action.previous_path
    if isinstance(action, ChmodAction):
        canonical["execute_filemode"] = action.execute_filemode
    if isinstance(action, CreateAction | UpdateAction | MoveAction):
        content = decode_content(action)
        canonical["content_sha256"] = (
            None if content is None else hashlib.sha256(content).hexdigest()
        )
    return canonical


# --- submission fields -------------------------------------------------------


def _project_violation(project: str) -> Violation | None:
    problem = project_problem(project)
    if problem is None:
        return None
    return Violation((*_BODY, "project"), problem, ViolationKind.INVALID_PROJECT)


def _branch_violations(
    submission: MRWorkItemCreate, config: MRTypeConfig
) -> list[Violation | None]:
    source = _branch_violation(submission.source_branch, "source_branch", config)
    found = [source or _prefix_violation(submission.source_branch, config.source_branch_prefix)]
    if submission.target_branch is not None:
        target = _branch_violation(submission.target_branch, "target_branch", config)
        if target is None and submission.target_branch != submission.source_branch:
            target = target_problem(submission.target_branch, config)
        found.append(target)
        if submission.target_branch == submission.source_branch:
            # The bot branch is force-pushed and deleted on merge: it must
            # never be the branch the change is meant for.
            found.append(
                Violation(
                    (*_BODY, "source_branch"),
                    "source_branch must differ from target_branch",
                    ViolationKind.SAME_BRANCH,
                )
            )
    return found


def target_problem(target_branch: str, config: MRTypeConfig) -> Violation | None:
    """Why the service must not merge into `target_branch`, or None.

    Branches under `source_branch_prefix` are the service's own bot branches,
    other callers' work in progress: merging into one would put this caller's
    change into someone else's MR. `target_branches`, when configured, lists
    the only branches MRs may target. Also checked when the item runs, for a
    target taken from the project's default branch.
    """
    prefix = config.source_branch_prefix
    if prefix and target_branch.startswith(prefix):
        return Violation(
            (*_BODY, "target_branch"),
            f"target_branch must not be under {prefix!r}: those are the service's own "
            "branches (handled_types.mr.source_branch_prefix)",
            ViolationKind.TARGET_NOT_ALLOWED,
        )
    allowed = config.target_branches
    if allowed is not None and not branch_matches(allowed, target_branch):
        return Violation(
            (*_BODY, "target_branch"),
            f"target_branch must match one of {', '.join(allowed)} "
            "(handled_types.mr.target_branches)",
            ViolationKind.TARGET_NOT_ALLOWED,
        )
    return None


def branch_matches(patterns: Sequence[str], branch: str) -> bool:
    """Whether `branch` matches a glob (`*` within a `/` segment, `**` across)."""
    return path_matches(scope_regexes(patterns, {}), branch)


def _prefix_violation(source_branch: str, prefix: str) -> Violation | None:
    """The service force-pushes its branches: they must live in its own namespace.

    A branch equal to the prefix has nothing of its own after it, so it is refused too.
    """
    if not prefix or (source_branch.startswith(prefix) and len(source_branch) > len(prefix)):
        return None
    return Violation(
        (*_BODY, "source_branch"),
        f"source_branch must start with {prefix!r} and name a branch below it "
        "(handled_types.mr.source_branch_prefix)",
        ViolationKind.BRANCH_OUTSIDE_PREFIX,
    )


def _branch_violation(name: str, field: str, config: MRTypeConfig) -> Violation | None:
    loc = (*_BODY, field)
    problem = branch_problem(name)
    if problem is not None:
        return Violation(loc, problem, ViolationKind.INVALID_BRANCH)
    size = _utf8_len(name)
    if size > config.max_branch_bytes:
        return _too_long(loc, field, size, config.max_branch_bytes, "bytes")
    return None


def _text_violations(submission: MRWorkItemCreate, config: MRTypeConfig) -> list[Violation | None]:
    found = [
        _text_violation(submission.title, "title", limit=config.max_title_chars),
        _text_violation(
            submission.commit_message,
            "commit_message",
            limit=config.max_commit_message_bytes,
            in_bytes=True,
            multiline=True,
        ),
    ]
    if submission.description is not None:
        found.append(
            _text_violation(
                submission.description,
                "description",
                limit=config.max_description_chars,
                multiline=True,
                allow_blank=True,
            )
            or _quick_action_violation(submission.description)
        )
    # package and change_kind are labels for filtering: same limit as a label.
    for field, value in (("package", submission.package), ("change_kind", submission.change_kind)):
        if value is not None:
            found.append(_text_violation(value, field, limit=config.max_label_chars))
    return found


def quick_action_line(text: str) -> int | None:
    """The 1-based number of the first line GitLab could run as a quick action, or None.

    GitLab executes `/close`, `/merge`, `/assign @x`, ... found at the start of
    a description line when the MR is created or edited, with the rights of
    the service's user. Any line whose first non-blank character is `/`
    counts (not only known commands: GitLab adds new ones). Every line break
    a renderer or parser might honour splits lines: LF, CR, CRLF, U+2028/9.
    """
    for number, line in enumerate(_LINE_BREAK.split(text), start=1):
        if line.lstrip().startswith("/"):
            return number
    return None


def _quick_action_violation(description: str) -> Violation | None:
    line = quick_action_line(description)
    if line is None:
        return None
    return Violation(
        (*_BODY, "description"),
        f"description line {line} starts with '/': GitLab would run it as a quick action",
        ViolationKind.QUICK_ACTION,
    )


def _label_violations(labels: Sequence[str], config: MRTypeConfig) -> list[Violation]:
    if len(labels) > config.max_labels:
        # One violation, not one per label: the list may be long on purpose.
        return [
            Violation(
                (*_BODY, "labels"),
                f"at most {config.max_labels} labels (got {len(labels)})",
                ViolationKind.TOO_MANY_LABELS,
            )
        ]
    violations: list[Violation] = []
    for index, label in enumerate(labels):
        violation = _text_violation(label, "labels", limit=config.max_label_chars, index=index)
        if violation is None and "," in label:
            # GitLab's API takes labels as one comma-separated string, and
            # GitLab refuses commas in label names.
            violation = Violation(
                (*_BODY, "labels", index),
                "a label must not contain ','",
                ViolationKind.INVALID_LABEL,
            )
        if violation is not None:
            violations.append(violation)
    return violations


def _text_violation(
    value: str,
    field: str,
    *,
    limit: int,
    index: int | None = None,
    in_bytes: bool = False,
    multiline: bool = False,
    allow_blank: bool = False,
) -> Violation | None:
    loc: Loc = (*_BODY, field) if index is None else (*_BODY, field, index)
    problem = _text_problem(value, _CONTROL_MULTILINE if multiline else _CONTROL)
    if problem is not None:
        return Violation(loc, f"{field}: {problem.message}", problem.kind)
    if not allow_blank and not value.strip():
        return Violation(loc, f"{field} must not be blank", ViolationKind.BLANK)
    size = _utf8_len(value) if in_bytes else len(value)
    if size > limit:
        return _too_long(loc, field, size, limit, "bytes" if in_bytes else "characters")
    return None


def _text_problem(value: str, control: re.Pattern[str]) -> Problem | None:
    """Lone surrogates (not encodable as UTF-8), then characters matched by `control`."""
    surrogate = _SURROGATE.search(value)
    if surrogate is not None:
        return Problem(
            ViolationKind.INVALID_UNICODE,
            f"not valid Unicode (lone surrogate U+{ord(surrogate.group()):04X})",
        )
    found = control.search(value)
    if found is not None:
        return Problem(
            ViolationKind.INVALID_CHARACTER,
            f"must not contain control characters (found U+{ord(found.group()):04X})",
        )
    return None


def _too_long(loc: Loc, field: str, size: int, limit: int, unit: str) -> Violation:
    return Violation(
        loc, f"{field} must be at most {limit} {unit} (got {size})", ViolationKind.TOO_LONG
    )


def _utf8_len(value: str) -> int:
    # surrogatepass: a length must never raise; invalid text is reported apart.
    return len(value.encode("utf-8", "surrogatepass"))


# --- file actions ------------------------------------------------------------


def _action_paths(action: FileAction) -> list[tuple[str, str]]:
    paths = [("file_path", action.file_path)]
    if isinstance(action, MoveAction):
        paths.append(("previous_path", action.previous_path))
    return paths


def _action_violations(
    index: int, action: FileAction, config: MRTypeConfig
) -> tuple[list[Violation], int]:
    """Violations of one action, and the bytes it counts towards the total."""
    base: Loc = (*_ACTIONS, index)
    found = [_path_violation(path, (*base, field), config) for field, path in _action_paths(action)]
    if isinstance(action, MoveAction) and action.file_path == action.previous_path:
        found.append(
            Violation(
                (*base, "file_path"),
                "a move needs file_path to differ from previous_path",
                ViolationKind.INVALID_MOVE,
            )
        )
    content_violation, size = _content_violation(action, (*base, "content"), config)
    found.append(content_violation)
    return [violation for violation in found if violation is not None], size


def _path_violation(path: str, loc: Loc, config: MRTypeConfig) -> Violation | None:
    problem = path_problem(path)
    if problem is not None:
        return Violation(loc, problem.message, problem.kind)
    size = _utf8_len(path)
    if size > config.max_path_bytes:
        return _too_long(loc, str(loc[-1]), size, config.max_path_bytes, "bytes")
    # Only canonical paths reach the blocklist: a glob over a path that is
    # refused anyway would add noise, not protection.
    pattern = matching_glob(path, config.path_blocklist)
    if pattern is not None:
        return Violation(
            loc,
            f"path {path!r} is blocked by the path_blocklist pattern {pattern!r}",
            ViolationKind.PATH_BLOCKED,
        )
    return None


def _content_violation(
    action: FileAction, loc: Loc, config: MRTypeConfig
) -> tuple[Violation | None, int]:
    if not isinstance(action, CreateAction | UpdateAction | MoveAction) or action.content is None:
        return None, 0
    if action.encoding == "text":
        problem = _text_problem(action.content, _NUL)
        if problem is not None:
            message = f"content: {problem.message}; send binary content with encoding 'base64'"
            return Violation(loc, message, problem.kind), 0
    try:
        size = decoded_size(action)
    except ValueError:
        message = (
            "content is not valid base64 (RFC 4648 standard alphabet with '=' padding, "
            "no whitespace or line breaks)"
        )
        return Violation(loc, message, ViolationKind.INVALID_BASE64), 0
    if size > config.max_file_bytes:
        message = f"content is {size} bytes after decoding; the limit is {config.max_file_bytes}"
        return Violation(loc, message, ViolationKind.TOO_LARGE), size
    return None, size


def _duplicate_path_violations(actions: Sequence[FileAction]) -> list[Violation]:
    """Each path may be touched by one action: a later one names the first."""
    first_use: dict[str, int] = {}
    violations: list[Violation] = []
    for index, action in enumerate(actions):
        for field, path in _action_paths(action):
            first = first_use.setdefault(path, index)
            if first != index:
                violations.append(
                    Violation(
                        (*_ACTIONS, index, field),
                        f"path {path!r} is already used by file_actions[{first}]",
                        ViolationKind.DUPLICATE_PATH,
                    )
                )
    return violations
