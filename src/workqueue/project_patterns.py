"""Project scopes of authorization rules: `projects:` glob patterns over GitLab paths.

A pattern is matched against the whole project path, case-sensitively:

- `*` matches within one path segment (never a `/`);
- `**` matches across segments (any run of characters, `/` included);
- `{claim}` is replaced by the value of that claim of the caller's token,
  matched literally: a claim value `*` or `a/**` is text, not a wildcard. A
  rule whose placeholder claim is missing (or is not a string or integer)
  does not match at all, so a token without `project_path` cannot fall back
  to a broader pattern.

Patterns compile to one anchored regular expression in the common subset of
Python's `re` and PostgreSQL's ARE syntax (non-capturing groups, `[^/]`, and
backslash escapes of non-alphanumeric characters), so the same expression
decides a single item in Python and filters a list in SQL (`~`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

# `{name}` placeholders: claim names as GitLab and Kubernetes spell them.
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.:-]+)\}")
_PIECE = re.compile(r"\*\*|\*|\{[A-Za-z0-9_.:-]+\}|[^*{}]+")
MATCH_EVERYTHING = "**"
_PATH_TEXT = re.compile(r"[A-Za-z0-9_./-]+")


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is not a usable project pattern, or None when it is."""
    if not pattern:
        return "project patterns must not be empty"
    if pattern != pattern.strip():
        return f"project pattern {pattern!r} has leading or trailing spaces"
    if not pattern.isascii():
        return f"project pattern {pattern!r}: GitLab project paths are ASCII"
    if "***" in pattern:
        return f"project pattern {pattern!r}: use `**` to cross segments, not `***`"
    position = 0
    for match in _PIECE.finditer(pattern):
        if match.start() != position:
            break
        position = match.end()
    if position != len(pattern):
        return (
            f"project pattern {pattern!r} has a stray brace: placeholders are "
            "`{claim_name}` (letters, digits, `_`, `.`, `:`, `-`)"
        )
    return None


def placeholders(pattern: str) -> frozenset[str]:
    """The claim names a pattern refers to."""
    return frozenset(_PLACEHOLDER.findall(pattern))


def _escape(text: str) -> str:
    # Escaping every character but ASCII letters and digits is valid, and
    # literal, in both Python `re` and PostgreSQL ARE (`re.escape` leaves some
    # alone; `str.isalnum` would leave non-ASCII letters unescaped).
    return "".join(
        character if character.isascii() and character.isalnum() else "\\" + character
        for character in text
    )


def _claim_text(value: Any) -> str | None:
    """A claim value usable in a path: strings as they are, integers in decimal.

    Only characters GitLab allows in project paths (ASCII letters, digits,
    `_`, `.`, `-`, `/`) are accepted; anything else cannot name a project, and
    keeping the expressions ASCII keeps Python and PostgreSQL (whose idea of
    "alphanumeric" follows the database's locale) reading them alike.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and _PATH_TEXT.fullmatch(value):
        return value
    return None


def pattern_regex(pattern: str, claims: Mapping[str, Any]) -> str | None:
    """The anchored regular expression of `pattern` for these claims; None: cannot match."""
    parts: list[str] = []
    for match in _PIECE.finditer(pattern):
        piece = match.group()
        if piece == "**":
            parts.append(".*")
        elif piece == "*":
            parts.append("[^/]*")
        elif piece.startswith("{"):
            value = _claim_text(claims.get(piece[1:-1]))
            if value is None:
                return None
            parts.append(_escape(value))
        else:
            parts.append(_escape(piece))
    return "^(?:" + "".join(parts) + ")$"


def scope_regexes(patterns: Iterable[str], claims: Mapping[str, Any]) -> tuple[str, ...]:
    """The expressions of every pattern that can match for these claims."""
    found = (pattern_regex(pattern, claims) for pattern in patterns)
    return tuple(regex for regex in found if regex is not None)


@lru_cache(maxsize=4096)
def _compiled(regex: str) -> re.Pattern[str]:
    # DOTALL: in PostgreSQL `.` also matches a newline; keep both engines equal.
    return re.compile(regex, re.DOTALL)


def path_matches(regexes: Iterable[str], project_path: str) -> bool:
    """Whether any of the expressions matches the whole path."""
    return any(_compiled(regex).match(project_path) for regex in regexes)
