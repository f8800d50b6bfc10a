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
from workqueue.types.mr.paths import matching_glob
from workqueue.types.mr.schemas import FileAction, MoveAction, MRWorkItemCreate
from workqueue.types.mr.violations import Loc, Violation, ViolationKind

__all__ = [
    "DEFAULT_CI_CONFIG_FILE",
    "SECRET_DETECTORS",
    "FileContent",
    "SecretFinding",
    "binary_problem",
    "ci_config_files",
    "ci_config_violations",
    "file_content_violations",
    "find_secrets",
    "published_texts",
    "redact_secrets",
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

# Each detector with its patterns as searched through a whole text: with MULTILINE, `^`
# and `$` still match at line ends, so no line's own match is missed (see find_secrets).
_SEARCHES: tuple[tuple[RegexBasedDetector, tuple[re.Pattern[str], ...]], ...] = tuple(
    (
        detector,
        tuple(
            re.compile(pattern.pattern, pattern.flags | re.MULTILINE)
            for pattern in detector.denylist
        ),
    )
    for detector in SECRET_DETECTORS
)

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


class _RecentFindings:
    """The findings of the texts scanned last, by SHA-256 of the text.

    The route and `submit_mr` each run the policy on the same submission: without this,
    every text would be scanned twice. A digest costs ~2 ms per MiB, a scan ~60 ms.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, tuple[SecretFinding, ...]] = OrderedDict()

    def get(self, key: bytes) -> tuple[SecretFinding, ...] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: bytes, findings: tuple[SecretFinding, ...]) -> None:
        with self._lock:
            self._entries[key] = findings
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)


_recent = _RecentFindings(size=64)


def find_secrets(text: str) -> list[SecretFinding]:
    """Every (line, kind) of `text` on which a detector finds a secret, in line order.

    A detector's verdict on a line is the library's own (`analyze_string` of that line);
    its patterns, searched through the whole text, only pick the lines worth asking about.
    A search may start a match on a line and end it on another: that line is asked, and
    the search goes on from the next line, so every line a pattern matches is asked once.
    The time taken grows with the text's length, whatever the text holds.
    """
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    known = _recent.get(key)
    if known is None:
        known = tuple(_scan(text))
        _recent.put(key, known)
    return list(known)


def _scan(text: str) -> list[SecretFinding]:
    found: set[SecretFinding] = set()
    for detector, searches in _SEARCHES:
        asked: set[int] = set()  # starts of the lines already put to this detector
        for search in searches:
            for start, end, number in _lines_matched(search, text):
                if start in asked:
                    continue
                asked.add(start)
                line = text[start:end].removesuffix("\r")
                if next(iter(detector.analyze_string(line)), None) is not None:
                    found.add(SecretFinding(number, detector.secret_type))
    return sorted(found, key=lambda finding: (finding.line, finding.kind))


def _lines_matched(search: re.Pattern[str], text: str) -> Iterator[tuple[int, int, int]]:
    """(start, end, number) of each line on which `search` starts a match, in order."""
    position, counted_to, number = 0, 0, 1
    while (match := search.search(text, position)) is not None:
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.start())
        end = len(text) if end == -1 else end
        number += text.count("\n", counted_to, start)
        counted_to = start
        yield start, end, number
        position = end + 1


def redact_secrets(text: str) -> str:
    """`text` with every match of a detector's pattern replaced by the detector's name
    in angle brackets (`<GitLab Token>`): for the messages of other rules, which quote
    what they refuse (a path, a branch, a URL naming another project)."""
    for detector, searches in _SEARCHES:
        for search in searches:
            text = search.sub(f"<{detector.secret_type}>", text)
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
            violation = _secrets_violation(loc, file.path, find_secrets(text))
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
        violation = _secrets_violation(loc, _field_name(loc), find_secrets(text))
        if violation is not None:
            violations.append(violation)
    return violations


def _field_name(loc: Loc) -> str:
    """`("body", "file_actions", 1, "file_path")` as `file_actions[1].file_path`."""
    name = ""
    for part in loc[1:]:
        name += f"[{part}]" if isinstance(part, int) else f".{part}" if name else part
    return name


def _secrets_violation(loc: Loc, where: str, findings: Sequence[SecretFinding]) -> Violation | None:
    if not findings:
        return None
    shown = "; ".join(
        f"line {finding.line}: {finding.kind}" for finding in findings[:MAX_FINDINGS_SHOWN]
    )
    more = len(findings) - MAX_FINDINGS_SHOWN
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
