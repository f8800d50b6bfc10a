"""Pure rules for repository paths, blocklist globs, branch names and project references.

Nothing here normalises: a submission must already be in canonical form, and
anything else is refused. Normalising on the caller's behalf would mean the
path we check is not the path we write, which is exactly the gap a security
boundary must not have.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from typing import NamedTuple

from workqueue.types.mr.validation.violations import ViolationKind

# Unicode categories refused in paths and branch names: control characters
# (C0, DEL, C1), invisible format characters (bidi overrides, zero-width
# joiners: the characters behind "Trojan Source" spoofing and behind HFS+
# ignoring code points so that ".g\u200cit" is ".git"), lone surrogates (not
# encodable as UTF-8) and the Unicode line/paragraph separators.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

# A component that some filesystem resolves to the repository's own `.git`:
# any case (case-insensitive filesystems), trailing dots/spaces and an NTFS
# alternate data stream suffix (Windows drops or splits those), or the NTFS
# 8.3 short name. Mirrors git's own `verify_path` protections.
_GIT_COMPONENT = re.compile(r"(?:\.git|git~1)[. ]*(?::.*)?", re.IGNORECASE | re.DOTALL)

# Characters `git check-ref-format` refuses anywhere in a ref name.
_REF_FORBIDDEN_CHARS = frozenset(" ~^:?*[\\")

# One segment of a GitLab namespace or project path (GitLab's own path format).
_PROJECT_SEGMENT = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*")
_PROJECT_ID = re.compile(r"[1-9][0-9]*")
_RESERVED_PROJECT_SUFFIXES = (".git", ".atom")


class Problem(NamedTuple):
    """A rule broken by a value, before it is tied to a location."""

    kind: ViolationKind
    message: str


def forbidden_character(value: str) -> str | None:
    """The first character of a category refused in names, described for a message."""
    for char in value:
        if unicodedata.category(char) in _FORBIDDEN_CATEGORIES:
            return f"U+{ord(char):04X}"
    return None


def path_problem(path: str) -> Problem | None:
    """The first canonical-form rule `path` breaks, or None when it is acceptable."""
    if not path:
        return Problem(ViolationKind.PATH_NOT_CANONICAL, "path must not be empty")
    bad = forbidden_character(path)
    if bad is not None:
        return Problem(
            ViolationKind.PATH_INVALID_CHARACTER,
            f"path must not contain control or invisible format characters (found {bad})",
        )
    return _shape_problem(path) or _component_problem(path)


def _shape_problem(path: str) -> Problem | None:
    if "\\" in path:
        message = "path must use '/' as separator, not backslashes"
    elif path.startswith("/"):
        message = "path must be relative to the repository root, not absolute"
    elif path.endswith("/"):
        message = "path must name a file, without a trailing '/'"
    elif "//" in path:
        message = "path must not contain empty segments ('//')"
    else:
        return None
    return Problem(ViolationKind.PATH_NOT_CANONICAL, message)


def _component_problem(path: str) -> Problem | None:
    for segment in path.split("/"):
        if segment in {".", ".."}:
            return Problem(
                ViolationKind.PATH_NOT_CANONICAL,
                f"path must not contain '{segment}' segments",
            )
        if _GIT_COMPONENT.fullmatch(segment):
            return Problem(
                ViolationKind.PATH_GIT_COMPONENT,
                f"path must not contain a '.git' component (found {segment!r})",
            )
    return None


def check_glob(pattern: str) -> None:
    """Raise ValueError when `pattern` is not a usable blocklist glob."""
    glob_to_regex(pattern)


@functools.cache
def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a blocklist glob; it must match the whole repository path.

    `**` matches any run of characters including `/` (`**/` also matches no
    directory at all, so `**/x` matches `x`); `*` and `?` stay inside one
    segment; `[abc]`, `[a-z]`, `[!abc]` are character classes. Matching is
    case-insensitive: a deny list should err towards refusing, and on the
    case-insensitive filesystems of macOS and Windows checkouts
    `.GITLAB-CI.yml` and `.gitlab-ci.yml` are the same file.
    """
    if not pattern:
        raise ValueError("blocklist pattern must not be empty")
    if pattern.startswith("/"):
        raise ValueError(
            f"blocklist pattern {pattern!r} must not start with '/': "
            "patterns always match the whole path from the repository root"
        )
    if pattern.endswith("/"):
        raise ValueError(
            f"blocklist pattern {pattern!r} must not end with '/': "
            "paths name files; use 'dir/**' to block a directory"
        )
    return re.compile("".join(_glob_tokens(pattern)), re.IGNORECASE | re.DOTALL)


def _glob_tokens(pattern: str) -> Iterable[str]:
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            yield "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            yield ".*"
            i += 2
        elif char == "*":
            yield "[^/]*"
            i += 1
        elif char == "?":
            yield "[^/]"
            i += 1
        elif char == "[":
            regex, i = _glob_class(pattern, i)
            yield regex
        else:
            yield re.escape(char)
            i += 1


def _glob_class(pattern: str, start: int) -> tuple[str, int]:
    """Translate the class opening at `start`; return its regex and the index after it."""
    body_start = start + 1
    negate = pattern.startswith(("!", "^"), body_start)
    if negate:
        body_start += 1
    # A ']' right after the opening (or after the negation) is a literal member.
    search_from = body_start + 1 if pattern.startswith("]", body_start) else body_start
    end = pattern.find("]", search_from)
    if end == -1:
        raise ValueError(f"blocklist pattern {pattern!r} has an unclosed '['")
    body = "".join(c if c == "-" else re.escape(c) for c in pattern[body_start:end])
    # Classes never match the separator, like `*` and `?`.
    regex = f"[^/{body}]" if negate else f"(?!/)[{body}]"
    return regex, end + 1


def matching_glob(path: str, patterns: Iterable[str]) -> str | None:
    """The first pattern that matches the whole of `path`, or None."""
    for pattern in patterns:
        if glob_to_regex(pattern).fullmatch(path):
            return pattern
    return None


def branch_problem(name: str) -> str | None:
    """Why `name` is not a valid branch name, or None.

    The rules of `git check-ref-format --branch`, plus: `@` alone (it means
    HEAD in revision syntax), and invisible format characters, lone surrogates
    and Unicode separators, refused for the same spoofing reasons as in paths.
    """
    if not name:
        return "branch name must not be empty"
    bad = forbidden_character(name)
    if bad is not None:
        return f"branch name must not contain control or invisible format characters (found {bad})"
    bad_chars = sorted(_REF_FORBIDDEN_CHARS.intersection(name))
    if bad_chars:
        shown = " ".join(repr(c) for c in bad_chars)
        return f"branch name must not contain any of: {shown}"
    return _branch_shape_problem(name) or _branch_component_problem(name)


def _branch_shape_problem(name: str) -> str | None:
    rules = (
        (name.startswith("-"), "must not start with '-'"),
        (name in {"@", "HEAD"}, f"must not be {name!r}"),
        (".." in name, "must not contain '..'"),
        ("@{" in name, "must not contain '@{'"),
        (name.startswith("/"), "must not start with '/'"),
        (name.endswith("/"), "must not end with '/'"),
        ("//" in name, "must not contain '//'"),
        (name.endswith("."), "must not end with '.'"),
    )
    for broken, message in rules:
        if broken:
            return f"branch name {message}"
    return None


def _branch_component_problem(name: str) -> str | None:
    for component in name.split("/"):
        if component.startswith("."):
            return f"branch name components must not start with '.' (found {component!r})"
        if component.endswith(".lock"):
            return f"branch name components must not end with '.lock' (found {component!r})"
    return None


def project_problem(project: str) -> str | None:
    """Why `project` is neither a numeric project id nor a GitLab project path, or None.

    The reference is used exactly as given (it is part of the upsert identity),
    so only one spelling of a numeric id is accepted: no sign, no leading zero.
    """
    if not project:
        return "project must not be empty"
    if project.isascii() and project.isdigit():
        if _PROJECT_ID.fullmatch(project):
            return None
        return "numeric project ids must not have leading zeros"
    segments = project.split("/")
    if len(segments) < 2:
        return "project must be a numeric id or a 'namespace/project' path"
    for segment in segments:
        problem = _project_segment_problem(segment)
        if problem is not None:
            return problem
    return None


def _project_segment_problem(segment: str) -> str | None:
    if not segment:
        return "project path must not have empty segments or leading/trailing '/'"
    if segment in {".", ".."}:
        return f"project path must not contain '{segment}' segments"
    if not _PROJECT_SEGMENT.fullmatch(segment):
        return (
            f"project path segment {segment!r} may contain only letters, digits, "
            "'_', '-' and '.', and must not start with '-'"
        )
    if segment.lower().endswith(_RESERVED_PROJECT_SUFFIXES):
        return f"project path segment {segment!r} must not end with '.git' or '.atom'"
    return None
