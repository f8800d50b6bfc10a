"""Content rules of an `mr` submission (`handled_types.mr.content`, API.md "Trust boundary,
round 2"): binary content, secrets, and the project's own CI configuration file.

Pure functions over decoded contents and plain values; the policy (`policy.py`) and the
submission route call them. Each situation, and what answers it:

| situation                                        | unless                 | 422 on          |
| ------------------------------------------------ | ---------------------- | --------------- |
| content with a NUL byte, or not UTF-8 after      | `binary: allow`, or    | the action's    |
| base64 decoding                                  | a `binary_paths` match | `content`       |
| a private key or token on a line of a file       | `secrets: allow`       | the action's    |
| (binary files too: tokens are ASCII)             |                        | `content`       |
| the same in `title`, `description`, the commit   | `secrets: allow`       | that field      |
| message, branches, labels, paths (all published) |                        |                 |
| a `file_path` or `previous_path` that is the     | the blocklist lacks    | that path       |
| project's CI configuration file                  | `{ci_config_path}`     |                 |

A secret is named by file (or field), line and kind, never quoted: the answer may end up
in a CI job's log that the whole project can read.

Secrets are found by Yelp's detect-secrets detectors (`SECRET_DETECTORS`), each deciding
line by line exactly as the library does. The set keeps the detectors of specific token
formats whose patterns cost time in proportion to the text. Left out: the high-entropy and
keyword heuristics and `BasicAuthDetector` (false positives on ordinary code, e.g.
`postgresql://user:pass@localhost/test` in test settings), `TelegramBotTokenDetector` and
`ArtifactoryDetector` (they match AWS ARNs and identifiers), and `JwtTokenDetector`,
`OpenAIDetector` and `NpmDetector`, whose patterns take time quadratic in a line's length
(64 KiB of `eyJ`, `sk-` or `//` takes seconds, 1 MiB minutes): a caller could hold a worker
for as long as it likes.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from workqueue.types.mr.config import ContentRulesConfig
from workqueue.types.mr.schemas import FileAction, MoveAction, MRWorkItemCreate
from workqueue.types.mr.validation.paths import matching_glob
from workqueue.types.mr.validation.violations import Loc, Violation, ViolationKind

__all__ = [
    "DEFAULT_CI_CONFIG_FILE",
    "SECRET_DETECTORS",
    "FileContent",
    "SecretFinding",
    "SecretScan",
    "binary_problem",
    "ci_config_files",
    "ci_config_violations",
    "file_content_violations",
    "find_secrets",
    "published_texts",
    "redact_secrets",
    "scan_secrets",
    "text_secret_violations",
]

# Where GitLab reads a project's pipeline when `ci_config_path` is unset.
DEFAULT_CI_CONFIG_FILE = ".gitlab-ci.yml"

SECRET_DETECTORS: tuple[RegexBasedDetector, ...] = (
    PrivateKeyDetector(),
    AWSKeyDetector(),
    AzureStorageKeyDetector(),
    DiscordBotTokenDetector(),
    GitHubTokenDetector(),
    GitLabTokenDetector(),
    MailchimpDetector(),
    PypiTokenDetector(),
    SendGridDetector(),
    SlackDetector(),
    SquareOAuthDetector(),
    StripeDetector(),
    TwilioKeyDetector(),
)


@dataclass(frozen=True, slots=True)
class _Anchor:
    """A cheap search for the part every match of a costly pattern holds, and how far a
    match may reach before and after it: the pattern then runs only in that window."""

    pattern: str
    before: int
    after: int


# Two patterns try many places at every character of a plausible fill (~0.45 s per MiB
# of `awskey...`, ~0.25 s of lowercase letters), where their anchor costs one step. Each
# has no anchors or lookarounds, so searching the window decides exactly as the line.
_ANCHORS: Mapping[str, _Anchor] = {
    # aws .{0,20}? password .{0,20}? then the quoted 40 characters: 51 before them.
    AWSKeyDetector.denylist[1].pattern: _Anchor(r"['\"][0-9a-zA-Z/+]{40}['\"]", 51, 0),
    MailchimpDetector.denylist[0].pattern: _Anchor(r"-us[0-9]", 32, 1),
}


@dataclass(frozen=True, slots=True)
class _Search:
    """One pattern of a detector as searched through a whole text: with MULTILINE, `^`
    and `$` still match at line ends, so no line's own match is missed (see find_secrets).
    None of the patterns matches across a line end (no DOTALL, no `\\s` or `\\n`)."""

    pattern: re.Pattern[str]
    anchor: re.Pattern[str] | None = None
    before: int = 0
    after: int = 0


def _search(pattern: re.Pattern[str]) -> _Search:
    # The anchor takes the pattern's flags: with IGNORECASE, `[a-z]` also matches U+017F
    # (long s) and U+212A (Kelvin sign).
    flags = pattern.flags | re.MULTILINE
    anchor = _ANCHORS.get(pattern.pattern)
    if anchor is None:
        return _Search(re.compile(pattern.pattern, flags))
    return _Search(
        re.compile(pattern.pattern, flags),
        re.compile(anchor.pattern, flags),
        anchor.before,
        anchor.after,
    )


_SEARCHES: tuple[tuple[RegexBasedDetector, tuple[_Search, ...]], ...] = tuple(
    (detector, tuple(_search(pattern) for pattern in detector.denylist))
    for detector in SECRET_DETECTORS
)

# What one text may put to the detectors: a line a pattern matches is asked of its
# detector (~40 us for a short line, ~0.5 us per character for a long one). Ordinary code
# has a handful of such lines; beyond either bound the text is refused, never accepted
# unscanned. Each holds a secret but for rare near-misses, so it would be refused anyway.
MAX_CANDIDATE_LINES = 1000
MAX_CANDIDATE_CHARACTERS = 65_536

# Findings listed per file or field; the rest are counted.
MAX_FINDINGS_SHOWN = 5

_ACTIONS: Loc = ("body", "file_actions")
_SETTING = "handled_types.mr.content.secrets"
# `<file>.yml@<group>/<project>[:<ref>]`: GitLab reads the pipeline from that project
# (its test in lib/gitlab/ci/project_config/external_project.rb).
_EXTERNAL_CI_CONFIG = re.compile(r".+(?:yml|yaml)@.+", re.DOTALL)
_LEADING_CURRENT_DIRECTORY = re.compile(r"\A(?:\.?/)+")


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A secret's place and kind (the detector's name for it); never the secret itself."""

    line: int  # 1-based, as git and editors count (LF ends a line)
    kind: str


@dataclass(frozen=True, slots=True)
class FileContent:
    """The bytes one file action writes, decoded from its encoding."""

    index: int  # the action's position in file_actions
    path: str
    content: bytes


def binary_problem(content: bytes) -> str | None:
    """Why git tools would treat `content` as binary (a NUL byte, bytes that are not
    UTF-8), or None for text."""
    nul = content.find(b"\x00")
    if nul != -1:
        return f"a NUL byte at offset {nul}"
    try:
        content.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"bytes that are not UTF-8 at offset {error.start}"
    return None


@dataclass(frozen=True, slots=True)
class SecretScan:
    """What a scan of one text found: the first findings in line order, how many in all,
    and whether the whole text was read within the bounds (`MAX_CANDIDATE_*`)."""

    shown: tuple[SecretFinding, ...]  # at most MAX_FINDINGS_SHOWN
    count: int
    complete: bool


class _RecentFindings:
    """The scans of the texts read last, by SHA-256 of the text.

    The route and `submit_mr` each run the policy on the same submission: without this,
    every text would be scanned twice. A digest costs ~2 ms per MiB, a scan ~60 ms.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, SecretScan] = OrderedDict()

    def get(self, key: bytes) -> SecretScan | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: bytes, scan: SecretScan) -> None:
        with self._lock:
            self._entries[key] = scan
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)


_recent = _RecentFindings(size=64)


def scan_secrets(text: str) -> SecretScan:
    """`find_secrets` of `text`, as much of it as a 422 shows, remembered a while."""
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    known = _recent.get(key)
    if known is None:
        found, complete = _scan(text)
        known = SecretScan(tuple(found[:MAX_FINDINGS_SHOWN]), len(found), complete)
        _recent.put(key, known)
    return known


def find_secrets(text: str) -> list[SecretFinding]:
    """Every (line, kind) of `text` on which a detector finds a secret, in line order,
    as far as the bounds let it read (see `scan_secrets` for whether it read all).

    A detector's verdict on a line is the library's own (`analyze_string` of that line);
    its patterns, searched through the whole text, only pick the lines worth asking about.
    A search may start a match on a line and end it on another: that line is asked, and
    the search goes on from the next line, so every line a pattern matches is asked once.
    The time taken grows with the text's length, whatever the text holds.
    """
    return _scan(text)[0]


def _scan(text: str) -> tuple[list[SecretFinding], bool]:
    found: set[SecretFinding] = set()
    lines_left, characters_left = MAX_CANDIDATE_LINES, MAX_CANDIDATE_CHARACTERS
    for detector, searches in _SEARCHES:
        asked: set[int] = set()  # starts of the lines already put to this detector
        for search in searches:
            for start, end, number in _lines_matched(search, text):
                if start in asked:
                    continue
                asked.add(start)
                line = text[start:end].removesuffix("\r")
                lines_left -= 1
                characters_left -= len(line)
                if lines_left < 0 or characters_left < 0:
                    return _in_line_order(found), False
                if next(iter(detector.analyze_string(line)), None) is not None:
                    found.add(SecretFinding(number, detector.secret_type))
    return _in_line_order(found), True


def _in_line_order(found: AbstractSet[SecretFinding]) -> list[SecretFinding]:
    return sorted(found, key=lambda finding: (finding.line, finding.kind))


def _lines_matched(search: _Search, text: str) -> Iterator[tuple[int, int, int]]:
    """(start, end, number) of each line on which `search` starts a match, in order."""
    position, counted_to, number = 0, 0, 1
    while (match_start := _next_match(search, text, position)) is not None:
        start = text.rfind("\n", 0, match_start) + 1
        end = text.find("\n", match_start)
        end = len(text) if end == -1 else end
        number += text.count("\n", counted_to, start)
        counted_to = start
        yield start, end, number
        position = end + 1


def _next_match(search: _Search, text: str, position: int) -> int | None:
    """Where the next match of `search` from `position` starts (or its anchor, which is
    on the same line), or None."""
    if search.anchor is None:
        match = search.pattern.search(text, position)
        return None if match is None else match.start()
    while (hit := search.anchor.search(text, position)) is not None:
        # Bounded finds: a text-wide one per hit would be quadratic in a long line.
        low = max(0, hit.start() - search.before)
        low = text.rfind("\n", low, hit.start()) + 1 or low
        high = text.find("\n", hit.end(), hit.end() + search.after)
        high = min(len(text), hit.end() + search.after) if high == -1 else high
        if search.pattern.search(text, low, high) is not None:
            return hit.start()
        position = hit.start() + 1
    return None


def redact_secrets(text: str) -> str:
    """`text` with every match of a detector's pattern replaced by the detector's name
    in angle brackets (`<GitLab Token>`): for the messages of other rules, which quote
    what they refuse (a path, a branch, a URL naming another project)."""
    for detector, searches in _SEARCHES:
        for search in searches:
            text = search.pattern.sub(f"<{detector.secret_type}>", text)
    return text


def file_content_violations(
    contents: Sequence[FileContent], rules: ContentRulesConfig
) -> list[Violation]:
    """Binary content outside `binary_paths`, and secrets in any file, as `rules` say."""
    violations: list[Violation] = []
    for file in contents:
        loc: Loc = (*_ACTIONS, file.index, "content")
        problem = binary_problem(file.content)
        if (
            problem is not None
            and rules.binary == "refuse"
            and matching_glob(file.path, rules.binary_paths) is None
        ):
            violations.append(
                Violation(
                    loc,
                    f"{file.path}: binary content ({problem}); binary files are accepted "
                    "only under handled_types.mr.content.binary_paths",
                    ViolationKind.BINARY_CONTENT,
                )
            )
            continue
        if rules.secrets == "refuse":
            # Tokens are ASCII: in a binary file they are found among the replacements.
            text = file.content.decode("utf-8", "replace")
            violation = _secrets_violation(loc, file.path, scan_secrets(text))
            if violation is not None:
                violations.append(violation)
    return violations


def published_texts(submission: MRWorkItemCreate, *, skip: AbstractSet[Loc]) -> dict[Loc, str]:
    """The texts and names of `submission` GitLab shows to everyone who can read the
    project, by location, leaving out those at `skip` (already refused: too long, ...).

    Title, description, commit message, branch names, labels and file paths; `package`
    and `change_kind` never reach GitLab.
    """
    texts: dict[Loc, str | None] = {
        ("body", "title"): submission.title,
        ("body", "description"): submission.description,
        ("body", "commit_message"): submission.commit_message,
        ("body", "source_branch"): submission.source_branch,
        ("body", "target_branch"): submission.target_branch,
    }
    if ("body", "labels") not in skip:
        texts.update(
            {("body", "labels", index): label for index, label in enumerate(submission.labels)}
        )
    if _ACTIONS not in skip:
        for index, action in enumerate(submission.file_actions):
            texts[(*_ACTIONS, index, "file_path")] = action.file_path
            if isinstance(action, MoveAction):
                texts[(*_ACTIONS, index, "previous_path")] = action.previous_path
    return {loc: text for loc, text in texts.items() if text is not None and loc not in skip}


def text_secret_violations(texts: Mapping[Loc, str], rules: ContentRulesConfig) -> list[Violation]:
    """Secrets in texts GitLab publishes (location -> text, e.g. `("body", "title")`)."""
    if rules.secrets != "refuse":
        return []
    violations: list[Violation] = []
    for loc, text in texts.items():
        violation = _secrets_violation(loc, _field_name(loc), scan_secrets(text))
        if violation is not None:
            violations.append(violation)
    return violations


def _field_name(loc: Loc) -> str:
    """`("body", "file_actions", 1, "file_path")` as `file_actions[1].file_path`."""
    name = ""
    for part in loc[1:]:
        name += f"[{part}]" if isinstance(part, int) else f".{part}" if name else part
    return name


def _secrets_violation(loc: Loc, where: str, scan: SecretScan) -> Violation | None:
    if not scan.complete:
        return Violation(
            loc,
            f"{where} could not be scanned for secrets within the limit "
            f"({MAX_CANDIDATE_LINES} lines, or {MAX_CANDIDATE_CHARACTERS} characters of lines, "
            f"that look like a token); it is refused unscanned ({_SETTING}): split it, or "
            "remove what looks like tokens",
            ViolationKind.SECRET,
        )
    if not scan.shown:
        return None
    shown = "; ".join(f"line {finding.line}: {finding.kind}" for finding in scan.shown)
    more = scan.count - len(scan.shown)
    and_more = f" (and {more} more)" if more > 0 else ""
    return Violation(
        loc,
        f"{where} {shown}{and_more}: secrets are refused ({_SETTING}); remove it, and revoke "
        "it if it is real",
        ViolationKind.SECRET,
    )


def ci_config_files(ci_config_path: str | None, project_path: str) -> tuple[str, ...]:
    """The paths of `project_path`'s repository that GitLab may read its pipeline from,
    given the project's `ci_config_path` setting (None or "" when unset).

    GitLab first looks for a file named exactly as the setting (`Repository` source),
    so that name is always one; `<file>@<this project>[:<ref>]` adds `<file>`. A file of
    another project (`<file>@group/other`) or a URL is read elsewhere: this project's
    repository holds nothing more of it. Each is also taken without leading `/` or `./`,
    in case GitLab resolves it so (refusing one path too many costs nothing).
    """
    if not ci_config_path:
        return (DEFAULT_CI_CONFIG_FILE,)
    files = [ci_config_path]
    if _EXTERNAL_CI_CONFIG.fullmatch(ci_config_path) is not None:
        file, _, location = ci_config_path.partition("@")
        if location.partition(":")[0].casefold() == project_path.casefold():
            files.append(file)
    for file in list(files):
        relative = _LEADING_CURRENT_DIRECTORY.sub("", file)
        if relative and relative not in files:
            files.append(relative)
    return tuple(files)


def ci_config_violations(
    actions: Sequence[FileAction], ci_config_path: str | None, project_path: str
) -> list[Violation]:
    """Actions touching the project's CI configuration file (compared as the blocklist
    compares, without regard to letter case)."""
    files = ci_config_files(ci_config_path, project_path)
    blocked = {file.casefold() for file in files}
    setting = "unset" if not ci_config_path else repr(ci_config_path)
    violations: list[Violation] = []
    for index, action in enumerate(actions):
        paths = [("file_path", action.file_path)]
        if isinstance(action, MoveAction):
            paths.append(("previous_path", action.previous_path))
        for field, path in paths:
            if path.casefold() in blocked:
                violations.append(
                    Violation(
                        (*_ACTIONS, index, field),
                        f"path {path!r} is the project's CI configuration file (GitLab's "
                        f"ci_config_path is {setting}), blocked by the path_blocklist entry "
                        "'{ci_config_path}'",
                        ViolationKind.PATH_BLOCKED,
                    )
                )
    return violations
