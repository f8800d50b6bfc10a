"""Text that would make GitLab act outside the item's project: found and refused.

The title, description and commit message reach GitLab as the service's user.
GitLab reads them as GitLab Flavored Markdown (references and mentions) and
scans the raw text for closing patterns, so a caller scoped to one project
could otherwise write elsewhere with the service's rights. For an item of
`team/app`:

- allowed: `Closes #12`, `Fixes team/app#3`, `!5`, `team/app@abc1234`, links
  to the project's own items, e-mail addresses (`bob@example.com`), `#12` or
  `@x` inside a link;
- `reference` (GitLab adds "mentioned in" notes over there, and closes the
  issues a closing pattern names on merge): `victim/prod#1`, `other!2`,
  `group#3` (a group's work item), `/victim/prod#4` (absolute form),
  `victim/prod@abc1234` (a commit), `[work_item:victim/prod/5]`, and a link on
  any host (the service cannot know every name GitLab answers to) to another
  project's `/-/issues/`, `/-/merge_requests/`, `/-/work_items/` or
  `/-/commit/`, old forms without `/-/` included;
- `epic` (epics belong to groups, never to the project): `&3`, `group&3`,
  `[epic:group/3]`, `/groups/g/-/epics/3`;
- `mention` (GitLab notifies them in the service's name): `@alice`,
  `@team/leads`, `@all`, `@here`.

Decisions where GitLab is subtle, each chosen to refuse rather than guess:

- Code spans and fenced blocks are scanned like any text. GitLab renders no
  references inside code, but its closing-pattern scan (`ClosingIssueExtractor`,
  GitLab 17) runs over the raw text, code included, and commit messages are
  not Markdown at all.
- Every reading of the text counts: as written; as Markdown renders it
  (backslash escapes and HTML entities decoded, so `victim/prod&#35;1` and
  `&#64;all` are found); and after Unicode compatibility normalisation with
  invisible characters removed (so a full-width at sign or number sign, or a
  zero-width space after `@`, is found: it looks like a mention or a
  reference to every reader even where GitLab would not act on it).
- A project is compared by its full path, case-insensitively (GitLab resolves
  paths that way). The shorthand `app#3` for `team/app#3` is refused: GitLab
  reads a bare name as a project of the same namespace or, for work items, as
  a group; only the full path is unambiguous.
- Jira-style keys (`PROJ-123`) are not judged: they are external, and the
  pattern matches ordinary words (`UTF-8`, `CVE-2024-1234`).

Everything here is linear in the text: sigils are found first and the path
before each is read backwards, so no pattern can backtrack over a long run.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import unquote

from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.content_rules import redact_secrets
from workqueue.types.mr.validation.violations import Loc, Violation, ViolationKind

__all__ = [
    "Finding",
    "FindingKind",
    "Reading",
    "field_violations",
    "submission_text_violations",
    "written_elsewhere",
]


class FindingKind(StrEnum):
    """What a piece of text makes GitLab touch outside the item's project."""

    REFERENCE = "reference"  # an issue, MR, work item or commit of another project, or a URL to one
    EPIC = "epic"  # any epic: epics belong to groups, never to the item's project
    MENTION = "mention"  # a user, a group, @all or @here


class Reading(StrEnum):
    """Which reading of the text showed a finding."""

    AS_WRITTEN = "as written"  # the text itself
    RENDERED = "as GitLab renders it"  # backslash escapes and HTML entities decoded
    NORMALISED = "after Unicode normalisation"  # NFKC, invisible characters removed


@dataclass(frozen=True, slots=True)
class Finding:
    kind: FindingKind
    text: str  # the reference or mention as that reading shows it
    closing: bool  # inside a closing pattern (`Closes …`): GitLab closes it on merge
    reading: Reading


# Longer than any GitLab full path; a longer run is judged by its tail, still foreign.
_MAX_PATH = 1024
_PATH_RUN = re.compile(r"[A-Za-z0-9_./\-]+")
# GitLab's path grammar (Gitlab::PathRegex): segments of letters, digits, `_`,
# `.` and `-`, not starting with `-`, joined by `/`.
_SEGMENT = r"[A-Za-z0-9_.][A-Za-z0-9_.\-]*"
_PATH = rf"{_SEGMENT}(?:/{_SEGMENT})*"

# `#12` (issue or work item), `!5` (MR), `&3` (epic): the path before the sigil
# is the run of path characters right before it (`_PathRuns`).
_SIGIL = re.compile(r"[#!&][0-9]+")
# `path@sha` (and `path@sha...sha`): a cross-project commit; a bare `@abc1234`
# is a mention. GitLab's commit pattern stops at no particular character, and
# SHA-256 ids run to 64 digits. Only a name without `/` followed by a name
# character or `.x` is taken for an e-mail address (`dev@cafe1234.example`).
_COMMIT = re.compile(r"@[0-9a-fA-F]{7,}+")
_EMAIL_DOMAIN_GOES_ON = re.compile(r"[A-Za-z0-9_\-]|\.[A-Za-z0-9]")
# GitLab: `(?<!\w)@name`, with Ruby's ASCII `\w`: `é@alice` mentions alice.
_MENTION = re.compile(rf"(?<![A-Za-z0-9_])@(?P<name>{_PATH})")
# GitLab's extensible references (GitLab 18): `[epic:group/3]`, `[work_item:g/p/4]`,
# and every other kind (`[vulnerability:g/p/5]`): a path of another project counts.
# The target stops at the next `[`, so each `[` is read past at most once.
_EXTENDED = re.compile(r"\[(?P<kind>[a-z_]{1,64}):(?P<target>[^\[\]\s]{1,1024})\]")
# Links GitLab autolinks (and its closing scan takes as one issue_ref): what
# they contain is no reference. A link ends early here, at brackets and
# quotes, so `[x](https://h/)victim/prod#1` leaves `victim/prod#1` outside it,
# where GitLab reads it too. GitLab's autolinker (comrak, as cmark-gfm) takes
# the run of letters before `://` as the scheme: `xhttps://` is no scheme it
# links, but `1https://`, `.https://` and `-https://` are links to it.
_URL_CHARS = r"[^\s<>()\[\]{}\"'`]+"
_LINK = re.compile(rf"(?<![A-Za-z])(?i:https?://){_URL_CHARS}")
# How much of a link GitLab's link patterns (`compose_link_reference_pattern`)
# turn into a reference: the item, then `(/[a-z0-9_=-]+)*/*`, a query and an
# anchor. What follows becomes text again, read by the filters that run after.
_LINKED_ITEM = re.compile(
    r"/(?:(?:commits?|compare)/[0-9a-fA-F]{7,}+(?:\.{2,3}[0-9a-fA-F]{7,}+)?"
    r"|(?:issues(?:/incident)?|merge_requests|work_items|epics|snippets|milestones"
    r"|alert_management|feature_flags|vulnerabilities)/[0-9]++)"
)
_LINKED_ITEM_TAIL = re.compile(
    r"(?:/[a-z0-9_=-]+)*+/*+(?:\?[a-z0-9_=-]+(?:&[a-z0-9_=-]+)*+)?(?:#[a-z0-9_-]+)?"
)
# Scheme-less addresses are judged as links but stay text: whether GitLab
# links them depends on its Markdown engine.
_BARE_ADDRESS = re.compile(rf"(?<![A-Za-z0-9+.\-])(?i:www\.){_URL_CHARS}")
# A path to an item outside a link, e.g. a relative Markdown link
# `[x](/victim/prod/-/issues/3)`: only the unmistakable `/-/` form.
_ITEM_PATH = re.compile(
    rf"(?<![A-Za-z0-9_.\-/])/?{_PATH}/-/(?:issues|merge_requests|work_items|epics|commit)"
    r"/(?:incident/)?[0-9a-fA-F]+"
)
_SCHEME = re.compile(r"^(?i:https?://)?")
_URL_KINDS = frozenset({"issues", "merge_requests", "work_items", "epics", "commit"})
_NUMBER = re.compile(r"[0-9]+")
_SHA = re.compile(r"[0-9a-fA-F]{7,40}")
# GitLab's default issue_closing_pattern (config/initializers/1_settings.rb,
# GitLab 17), its issue_ref simplified: only used to say "closing pattern" in
# the message, since every reference outside the project is refused anyway
# (an instance may configure other keywords).
_CLOSING = re.compile(
    r"\b(?:clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?)"
    r":? +(?:issues? +)?"
    rf"(?:(?>(?i:https?://)[^\s>]+|/?(?:{_PATH})?[#!][0-9]+)(?> *,? +and +| *,? *))+",
    re.IGNORECASE,
)
# CommonMark: a backslash before ASCII punctuation renders the punctuation.
_BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
# Unicode category Cf (format characters: zero-width spaces and joiners, bidi
# controls, tags) plus the invisible fillers and selectors of other categories.
_INVISIBLE = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
    "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0"
    "\U000e0100-\U000e01ef]"
)
_QUOTED_AT_MOST = 5
_QUOTE_CHARS = 120


def written_elsewhere(text: str, own_project: str) -> list[Finding]:
    """Everything in `text` that GitLab would act on outside `own_project`, in order.

    `own_project` is the item's full project path (as GitLab spells it); any
    other string (an unresolved numeric id) makes every explicit path foreign.
    One finding per distinct (kind, text); the first reading that shows it wins.
    """
    own = own_project.strip("/").lower()
    findings: dict[tuple[FindingKind, str], Finding] = {}
    for reading, view in _readings(text):
        for finding in _findings(view, own, reading):
            findings.setdefault((finding.kind, finding.text), finding)
    return list(findings.values())


def field_violations(
    field: str,
    text: str,
    *,
    own_project: str,
    allow_mentions: bool = False,
    allow_cross_project_references: bool = False,
) -> list[Violation]:
    """The 422 entries for one text field: at most one for references, one for mentions."""
    if allow_mentions and allow_cross_project_references:
        return []
    findings = written_elsewhere(text, own_project)
    loc: Loc = ("body", field)
    violations: list[Violation] = []
    references = [f for f in findings if f.kind is not FindingKind.MENTION]
    if references and not allow_cross_project_references:
        violations.append(
            Violation(
                loc,
                f"{field} refers to {_quoted(references)} outside project {own_project}: "
                "GitLab would close or annotate them with the service's rights (only the "
                "project's own issues, merge requests and commits may be named; "
                "handled_types.mr.allow_cross_project_references allows them)",
                ViolationKind.CROSS_PROJECT_REFERENCE,
            )
        )
    mentions = [f for f in findings if f.kind is FindingKind.MENTION]
    if mentions and not allow_mentions:
        violations.append(
            Violation(
                loc,
                f"{field} mentions {_quoted(mentions)}: GitLab would notify them in the "
                "service's name (handled_types.mr.allow_mentions allows it)",
                ViolationKind.MENTION,
            )
        )
    return violations


def submission_text_violations(
    submission: MRWorkItemCreate,
    config: MRTypeConfig,
    *,
    project_path: str | None,
    refused: frozenset[Loc] = frozenset(),
) -> list[Violation]:
    """The violations of `title`, `description` and `commit_message` (every text of a
    submission GitLab renders or scans), skipping fields already in `refused`.

    References are compared with `project_path` (the canonical path once
    resolved), else with `project` when it is a path. For a numeric id not
    resolved yet nothing is judged here: the check runs again with the
    resolved path before anything is stored (`submit_mr`).
    """
    own = project_path
    if own is None and not submission.project.isdigit():
        own = submission.project
    if own is None:
        return []
    fields = (
        ("title", submission.title),
        ("description", submission.description),
        ("commit_message", submission.commit_message),
    )
    return [
        violation
        for field, text in fields
        if text is not None and ("body", field) not in refused
        for violation in field_violations(
            field,
            text,
            own_project=own,
            allow_mentions=config.allow_mentions,
            allow_cross_project_references=config.allow_cross_project_references,
        )
    ]


# --- readings ----------------------------------------------------------------


def _readings(text: str) -> Iterator[tuple[Reading, str]]:
    yield Reading.AS_WRITTEN, text
    rendered = (
        html.unescape(_BACKSLASH_ESCAPE.sub(r"\1", text)) if "&" in text or "\\" in text else text
    )
    if rendered != text:
        yield Reading.RENDERED, rendered
    if not rendered.isascii():
        normalised = _INVISIBLE.sub("", unicodedata.normalize("NFKC", rendered))
        if normalised != rendered:
            yield Reading.NORMALISED, normalised


def _findings(view: str, own: str, reading: Reading) -> list[Finding]:
    # (kind, text) -> where it first appears: a text repeating one reference a
    # million times costs one entry.
    found: dict[tuple[FindingKind, str], int] = {}
    masked = _mask_links(view, own, found)
    for extended in _EXTENDED.finditer(masked):
        kind = _extended_kind(extended.group("kind"), extended.group("target"), own)
        if kind is not None:
            found.setdefault((kind, extended.group()), extended.start())
    # Without the `www.` addresses, judged whole already.
    paths = _BARE_ADDRESS.sub(_blank, masked) if "www." in masked.lower() else masked
    for item_path in _ITEM_PATH.finditer(paths):
        kind = _item_path_kind(item_path.group(), own)
        if kind is not None:
            found.setdefault((kind, item_path.group()), item_path.start())
    _find_short_references(masked, own, found)
    for mention in _MENTION.finditer(masked):
        name = mention.group("name").rstrip(".-")
        found.setdefault((FindingKind.MENTION, "@" + name), mention.start())

    closing = [match.span() for match in _CLOSING.finditer(view)] if found else []
    return [
        Finding(
            kind,
            text,
            kind is not FindingKind.MENTION and any(start <= at < end for start, end in closing),
            reading,
        )
        for (kind, text), at in sorted(found.items(), key=lambda entry: entry[1])
    ]


def _mask_links(view: str, own: str, found: dict[tuple[FindingKind, str], int]) -> str:
    """`view` with every link blanked out, noting the links (and `www.` addresses)
    that lead out of the project."""

    def judge(url: re.Match[str]) -> None:
        kind = _url_kind(url.group(), own)
        if kind is not None:
            found.setdefault((kind, _shortened(url.group())), url.start())

    def mask(url: re.Match[str]) -> str:
        judge(url)
        # The rest of a link is no reference to GitLab (`page#12`, `/@alice`),
        # except what follows an item GitLab turns into a reference.
        text = url.group()
        item = _LINKED_ITEM.search(text)
        if item is None:
            return _blank(url)
        end = _LINKED_ITEM_TAIL.match(text, item.end())
        cut = end.end() if end is not None else item.end()
        return " " * cut + text[cut:]

    for address in _BARE_ADDRESS.finditer(view):
        judge(address)
    return _LINK.sub(mask, view)


def _find_short_references(view: str, own: str, found: dict[tuple[FindingKind, str], int]) -> None:
    """`path#12`, `path!5`, `&3` and `path@sha`, each with the path run before it."""
    runs = _PathRuns(view)
    for sigil in _SIGIL.finditer(view):
        at = sigil.start()
        start = runs.start_before(at)
        if view[at] == "&":
            found.setdefault((FindingKind.EPIC, view[start : sigil.end()]), start)
        elif start < at and not _is_own(view[start:at], own):
            found.setdefault((FindingKind.REFERENCE, view[start : sigil.end()]), start)
    for commit in _COMMIT.finditer(view):
        at = commit.start()
        start = runs.start_before(at)
        path = view[start:at]
        if not path or _is_own(path, own):
            continue
        if "/" not in path and _EMAIL_DOMAIN_GOES_ON.match(view, commit.end()):
            continue
        found.setdefault((FindingKind.REFERENCE, _shortened(view[start : commit.end()])), start)


def _blank(match: re.Match[str]) -> str:
    return " " * len(match.group())


class _PathRuns:
    """Where the run of path characters ending at a position starts, found in one pass.

    The whole run before a sigil counts as its path: whatever GitLab makes of
    it, only a run that is exactly the project's own path is the project's own.
    """

    def __init__(self, view: str) -> None:
        self._starts = {run.end(): run.start() for run in _PATH_RUN.finditer(view)}

    def start_before(self, at: int) -> int:
        return max(self._starts.get(at, at), at - _MAX_PATH)


def _is_own(path: str, own: str) -> bool:
    # A leading '/' is GitLab's absolute form of the same path (`/team/app#3`).
    return path.lstrip("/").lower() == own


def _url_kind(url: str, own: str) -> FindingKind | None:
    """What a link points at: another project's issue, MR, work item or commit, any
    epic, or (None) nothing GitLab would act on."""
    address = _SCHEME.sub("", url)
    return _item_path_kind(address.partition("/")[2], own)


def _item_path_kind(path: str, own: str) -> FindingKind | None:
    """The kind of `group/project/-/issues/3` (with or without `/-/`, a query or an
    anchor), as `_url_kind`."""
    path = unquote(path.split("?", 1)[0].split("#", 1)[0])
    segments = [segment for segment in path.split("/") if segment]
    for index, segment in enumerate(segments):
        if segment not in _URL_KINDS or not _is_item_id(segment, segments[index + 1 :]):
            continue
        project = segments[:index]
        if project and project[-1] == "-":
            project = project[:-1]
        if not project:
            return None
        if segment == "epics":
            return FindingKind.EPIC
        # `/groups/<group>/-/work_items/3`: a group's item, never the project's.
        if project[0] == "groups" or not _is_own("/".join(project), own):
            return FindingKind.REFERENCE
        return None
    return None


def _is_item_id(kind: str, rest: list[str]) -> bool:
    if kind == "commit":
        return bool(rest) and _SHA.fullmatch(rest[0]) is not None
    if kind == "issues" and rest[:1] == ["incident"]:
        rest = rest[1:]
    return bool(rest) and _NUMBER.fullmatch(rest[0]) is not None


def _extended_kind(kind: str, target: str, own: str) -> FindingKind | None:
    if kind == "epic":
        return FindingKind.EPIC
    path, separator, _ = target.rpartition("/")
    if separator and not _is_own(path, own):
        return FindingKind.REFERENCE
    return None


def _shortened(text: str) -> str:
    # A token cut in half would no longer be recognised, so redacted first.
    text = redact_secrets(text)
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 1] + "\u2026"


def _quoted(findings: list[Finding]) -> str:
    shown = []
    for finding in findings[:_QUOTED_AT_MOST]:
        notes = []
        if finding.closing:
            notes.append("in a closing pattern")
        if finding.kind is FindingKind.EPIC:
            notes.append("an epic")
        if finding.reading is not Reading.AS_WRITTEN:
            notes.append(str(finding.reading))
        shown.append(f"'{finding.text}'" + (f" ({', '.join(notes)})" if notes else ""))
    rest = len(findings) - len(shown)
    return ", ".join(shown) + (f" and {rest} more" if rest else "")
