"""Content rules (`types/mr/validation/content_rules.py`): binaries, secrets, CI config."""

from __future__ import annotations

import base64
import dataclasses
import random
import re
import string
import sys

import pytest

from workqueue.types.mr.config import ContentRulesConfig, MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation import content_rules
from workqueue.types.mr.validation.content_rules import (
    MAX_CANDIDATE_CHARACTERS,
    MAX_CANDIDATE_LINES,
    SECRET_DETECTORS,
    FileContent,
    SecretFinding,
    SecretScan,
    _RecentFindings,
    binary_problem,
    ci_config_files,
    ci_config_violations,
    file_content_violations,
    find_secrets,
    scan_secrets,
    text_secret_violations,
)
from workqueue.types.mr.validation.policy import check_file_actions, check_submission

# Tokens are assembled at run time so that no scanner finds secrets in this file.
_RANDOM = random.Random(4)  # noqa: S311 - reproducible fixtures, not keys
_LOWER = string.ascii_lowercase + string.digits
_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits


def _pick(alphabet: str, count: int) -> str:
    return "".join(_RANDOM.choice(alphabet) for _ in range(count))


GITLAB = "glpat" + "-" + _pick(_ALNUM, 20)
GITHUB = "ghp" + "_" + _pick(_ALNUM, 36)
AWS = "AKIA" + _pick(_UPPER, 16)
SLACK = "xoxb" + "-123456789012-" + _pick(_LOWER, 24)
STRIPE = "sk" + "_live_" + _pick(_ALNUM, 24)
SENDGRID = "SG" + "." + _pick(_ALNUM, 22) + "." + _pick(_ALNUM, 43)
PRIVATE_KEY_LINE = "-----BEGIN " + "OPENSSH PRIVATE KEY-----"
TOKENS = {
    "GitLab Token": GITLAB,
    "GitHub Token": GITHUB,
    "AWS Access Key": AWS,
    "Slack Token": SLACK,
    "Stripe Access Key": STRIPE,
    "SendGrid API Key": SENDGRID,
    "Private Key": PRIVATE_KEY_LINE,
}
REFUSE = ContentRulesConfig()


# --- binary ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", None),
        (b"plain\ntext\r\n", None),
        ("ünïcödé 😀".encode(), None),
        (b"\xef\xbb\xbfwith a BOM", None),
        (b"\x1b[0m escapes \x7f and \x0c", None),
        (b"\x00", "a NUL byte at offset 0"),
        (b"ab\x00cd\xff", "a NUL byte at offset 2"),
        ("a".encode("utf-16-le"), "a NUL byte at offset 1"),
        (b"caf\xe9", "bytes that are not UTF-8 at offset 3"),
        (b"\xc3", "bytes that are not UTF-8 at offset 0"),
        (b"\x89PNG\r\n\x1a\n", "bytes that are not UTF-8 at offset 0"),
        (b"\xed\xa0\x80", "bytes that are not UTF-8 at offset 0"),  # an encoded surrogate
    ],
)
def test_binary_problem(content, problem):
    assert binary_problem(content) == problem


# --- finding secrets -------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "token"), TOKENS.items())
def test_each_kind_is_found_with_its_line(kind, token):
    text = f"first line\nsecond = 'x'\nvalue = {token}\nlast\n"
    assert find_secrets(text) == [SecretFinding(3, kind)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GITLAB, [SecretFinding(1, "GitLab Token")]),
        (f"a\r\nb\r\n{GITLAB}\r\n", [SecretFinding(3, "GitLab Token")]),
        (f"\n\n\n\n{AWS}", [SecretFinding(5, "AWS Access Key")]),
        (
            f"{GITLAB}\n{GITLAB}\nplain\n{AWS} {GITHUB}\n",
            [
                SecretFinding(1, "GitLab Token"),
                SecretFinding(2, "GitLab Token"),
                SecretFinding(4, "AWS Access Key"),
                SecretFinding(4, "GitHub Token"),
            ],
        ),
        # The same kind twice on a line is one finding.
        (f"{GITLAB} {GITLAB}", [SecretFinding(1, "GitLab Token")]),
        # Deep inside one long line (minified files).
        ("x" * 30_000 + f" {GITHUB} " + "y" * 30_000, [SecretFinding(1, "GitHub Token")]),
        # A CR alone does not end a line for git, so neither here.
        (f"a\rb\r{GITLAB}", [SecretFinding(1, "GitLab Token")]),
    ],
)
def test_lines_are_counted_as_git_counts_them(text, expected):
    assert find_secrets(text) == expected


ORDINARY_CODE = [
    "DATABASE_URL = 'postgresql://user:pass@localhost:5432/test'",  # BasicAuthDetector: left out
    "token = os.environ['GITLAB_TOKEN']",
    "password = 'hunter2'",  # KeywordDetector: left out
    "sha = 'c70a8415f2e4a0a1b1e9a1c3d5b7e9f0a2c4e6d8'",
    "id = '123e4567-e89b-12d3-a456-426614174000'",
    "blob = 'QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkwYWJjZGVmZ2hpamtsbW5vcHFy'",
    "glpat-short and AKIA1234",
    "-----BEGIN PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----",
    "arn:aws:sns:us-west-2:111111111111:Glacier-InventoryRetrieval-topic-Example",
    "header = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl'",  # JWTs: left out
    "",
]


@pytest.mark.parametrize("line", ORDINARY_CODE)
def test_ordinary_code_holds_no_secret(line):
    assert find_secrets(line) == []


def test_findings_are_what_the_library_finds_line_by_line():
    """The whole-text search only picks the lines to ask: it changes no verdict."""
    fragments = [
        *TOKENS.values(),
        *ORDINARY_CODE,
        "glpat-",
        "AKIA",
        "aws_secret_key = '" + _pick(_ALNUM, 40) + "'",
        "BEGIN RSA",
        "PRIVATE KEY",
        "xoxb-1-",
        "\r",
        "\t",
        # Near misses of the two patterns searched only around their anchors.
        "aws",
        "key",
        "password",
        "x" * 20,
        "'",
        '"',
        _pick(_ALNUM + "/+", 40),
        _pick(_ALNUM, 39),
        "aws_pass = '" + _pick(_ALNUM, 40),
        "\u017f",  # long s: IGNORECASE's `[a-z]` matches it
        "\u212a",  # Kelvin sign, likewise
        _pick(_LOWER, 32),
        _pick(_LOWER, 31),
        "-us",
        "-us1",
        "1",
    ]
    generator = random.Random(7)  # noqa: S311 - reproducible fixtures
    for _ in range(3000):
        parts = [generator.choice(fragments) for _ in range(generator.randint(0, 12))]
        separators = [generator.choice(["\n", " ", "", "\r\n"]) for _ in parts]
        text = "".join(part + separator for part, separator in zip(parts, separators, strict=True))
        assert find_secrets(text) == _line_by_line(text), repr(text)


def _line_by_line(text: str) -> list[SecretFinding]:
    found = {
        SecretFinding(number, detector.secret_type)
        for number, line in enumerate(text.split("\n"), start=1)
        for detector in SECRET_DETECTORS
        if any(True for _ in detector.analyze_string(line.removesuffix("\r")))
    }
    return sorted(found, key=lambda finding: (finding.line, finding.kind))


def test_finding_is_pure():
    text = f"a\n{GITLAB}\n"
    assert find_secrets(text) == find_secrets(text) == [SecretFinding(2, "GitLab Token")]


# --- file contents ---------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n\x00"
LEAKY = f"[default]\naws_access_key_id = {AWS}\n".encode()


@pytest.mark.parametrize(
    ("rules", "path", "content", "kinds"),
    [
        (REFUSE, "logo.png", PNG, ["binary_content"]),
        (REFUSE, "notes.txt", b"plain\n", []),
        (REFUSE, "creds.ini", LEAKY, ["secret"]),
        (ContentRulesConfig(binary="allow"), "logo.png", PNG, []),
        (ContentRulesConfig(binary_paths=["assets/**"]), "assets/img/logo.png", PNG, []),
        (ContentRulesConfig(binary_paths=["assets/**"]), "ASSETS/logo.png", PNG, []),
        (ContentRulesConfig(binary_paths=["assets/**"]), "src/logo.png", PNG, ["binary_content"]),
        (ContentRulesConfig(binary_paths=["*.png"]), "logo.png", PNG + b"\n" + LEAKY, ["secret"]),
        (ContentRulesConfig(secrets="allow"), "creds.ini", LEAKY, []),
        # Binary and refused: named once, as binary.
        (REFUSE, "blob.bin", PNG + LEAKY, ["binary_content"]),
        (ContentRulesConfig(binary="allow", secrets="allow"), "x.bin", PNG + LEAKY, []),
    ],
)
def test_file_content_rules(rules, path, content, kinds):
    violations = file_content_violations([FileContent(3, path, content)], rules)
    assert [violation.kind for violation in violations] == kinds
    assert all(violation.loc == ("body", "file_actions", 3, "content") for violation in violations)


def test_a_secret_is_named_by_file_line_and_kind_never_quoted():
    (violation,) = file_content_violations([FileContent(0, "creds.ini", LEAKY)], REFUSE)
    assert violation.message.startswith("creds.ini line 2: AWS Access Key: secrets are refused")
    assert "handled_types.mr.content.secrets" in violation.message
    assert AWS not in violation.message


def test_a_binary_file_is_named_with_why_and_the_setting():
    (violation,) = file_content_violations([FileContent(0, "logo.png", PNG)], REFUSE)
    assert violation.message == (
        "logo.png: binary content (a NUL byte at offset 8); binary files are "
        "accepted only under handled_types.mr.content.binary_paths"
    )


def test_many_findings_are_counted_beyond_the_first_five():
    content = "".join(f"t{n} = {GITLAB}\n" for n in range(8)).encode()
    (violation,) = file_content_violations([FileContent(0, "f", content)], REFUSE)
    assert "line 1: GitLab Token; line 2:" in violation.message
    assert "line 5: GitLab Token (and 3 more)" in violation.message
    assert "line 6" not in violation.message


@pytest.mark.parametrize(
    ("texts", "locs"),
    [
        ({("body", "title"): f"Rotate {GITLAB}"}, [("body", "title")]),
        (
            {("body", "description"): f"a\n\n{AWS}", ("body", "commit_message"): "fine"},
            [("body", "description")],
        ),
        ({("body", "title"): "fine", ("body", "labels", 0): "fine"}, []),
    ],
)
def test_text_secret_rules(texts, locs):
    violations = text_secret_violations(texts, REFUSE)
    assert [violation.loc for violation in violations] == locs
    assert text_secret_violations(texts, ContentRulesConfig(secrets="allow")) == []


# --- through the policy ----------------------------------------------------------------


def _submission(**overrides: object) -> MRWorkItemCreate:
    body: dict[str, object] = {
        "project": "team/app",
        "source_branch": "workqueue/x",
        "title": "t",
        "commit_message": "m",
        "file_actions": [{"action": "create", "file_path": "f", "content": "x"}],
        **overrides,
    }
    return MRWorkItemCreate.model_validate(body)


def _kinds(submission: MRWorkItemCreate, config: MRTypeConfig | None = None) -> list:
    return [(v.loc, v.kind) for v in check_submission(submission, config or MRTypeConfig())]


def test_the_policy_scans_decoded_base64_and_published_texts():
    encoded = base64.b64encode(LEAKY).decode()
    submission = _submission(
        description=f"see\n{GITHUB}",
        commit_message=f"Add {SLACK}",
        file_actions=[
            {"action": "create", "file_path": "c", "content": encoded, "encoding": "base64"}
        ],
    )
    assert _kinds(submission) == [
        (("body", "file_actions", 0, "content"), "secret"),
        (("body", "description"), "secret"),
        (("body", "commit_message"), "secret"),
    ]


def test_names_gitlab_shows_are_scanned_too():
    submission = _submission(
        source_branch=f"workqueue/{GITLAB}",
        labels=["ok", f"k-{AWS}"],
        file_actions=[
            {"action": "create", "file_path": f"keys/{GITHUB}.txt", "content": "x"},
            {"action": "move", "file_path": "b", "previous_path": f"old-{GITLAB}"},
        ],
    )
    violations = check_submission(submission, MRTypeConfig())
    assert [(v.loc, v.kind) for v in violations] == [
        (("body", "source_branch"), "secret"),
        (("body", "labels", 1), "secret"),
        (("body", "file_actions", 0, "file_path"), "secret"),
        (("body", "file_actions", 1, "previous_path"), "secret"),
    ]
    assert violations[1].message.startswith("labels[1] line 1: AWS Access Key:")
    assert violations[3].message.startswith("file_actions[1].previous_path line 1: GitLab Token:")
    assert not any(secret in v.message for v in violations for secret in (GITLAB, AWS, GITHUB))


def test_a_text_refused_by_another_rule_is_still_scanned():
    """A mention does not hide a secret: every problem is reported at once."""
    submission = _submission(description=f"cc @alice, {GITLAB}")
    assert _kinds(submission) == [
        (("body", "description"), "mention"),
        (("body", "description"), "secret"),
    ]


def test_content_already_refused_is_not_read_again():
    submission = _submission(
        title=f"{GITLAB}\x07",  # a control character: refused as such, not scanned
        file_actions=[
            {"action": "create", "file_path": "a", "content": "QQ", "encoding": "base64"},
            {"action": "create", "file_path": "b", "content": f"{GITLAB}\x00"},
        ],
    )
    assert _kinds(submission) == [
        (("body", "title"), "invalid_character"),
        (("body", "file_actions", 0, "content"), "invalid_base64"),
        (("body", "file_actions", 1, "content"), "invalid_character"),
    ]


def test_nothing_is_scanned_beyond_the_size_limits():
    config = MRTypeConfig(max_file_bytes=64, max_total_bytes=100)
    big = f"{GITLAB}\n" + "x" * 60
    too_big = MRWorkItemCreate.model_validate(
        _submission().model_dump()
        | {"file_actions": [{"action": "create", "file_path": "f", "content": big}]}
    )
    assert [v.kind for v in check_file_actions(too_big.file_actions, config)] == ["too_large"]
    several = [
        {"action": "create", "file_path": f"f{n}", "content": f"{GITLAB}\n"} for n in range(4)
    ]
    total_over = _submission(file_actions=several)
    assert [v.kind for v in check_file_actions(total_over.file_actions, config)] == ["too_large"]


# --- the CI configuration file ---------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "files"),
    [
        (None, (".gitlab-ci.yml",)),
        ("", (".gitlab-ci.yml",)),
        ("ci/build.yml", ("ci/build.yml",)),
        ("ci/build.yml@team/app", ("ci/build.yml@team/app", "ci/build.yml")),
        ("ci/build.yaml@Team/App:stable", ("ci/build.yaml@Team/App:stable", "ci/build.yaml")),
        (".gitlab-ci.yml@victim/prod", (".gitlab-ci.yml@victim/prod",)),
        ("ci/build.yml@team/app-other", ("ci/build.yml@team/app-other",)),
        ("https://ci.example.com/pipelines/app.yml", ("https://ci.example.com/pipelines/app.yml",)),
        # Not the external form (GitLab wants a .yml or .yaml file before '@'): a path here.
        ("ci/build@team/app", ("ci/build@team/app",)),
        ("./ci/build.yml", ("./ci/build.yml", "ci/build.yml")),
        (
            "/ci/build.yml@team/app",
            ("/ci/build.yml@team/app", "/ci/build.yml", "ci/build.yml@team/app", "ci/build.yml"),
        ),
    ],
)
def test_ci_config_files(setting, files):
    assert ci_config_files(setting, "team/app") == files


def _actions(*actions: dict[str, object]) -> list:
    return list(_submission(file_actions=list(actions)).file_actions)


def test_ci_config_violations_cover_every_path_an_action_touches():
    actions = _actions(
        {"action": "update", "file_path": "ci/build.yml", "content": "x"},
        {"action": "create", "file_path": "ci/other.yml", "content": "x"},
        {"action": "move", "file_path": "old.yml", "previous_path": "CI/BUILD.yml"},
        {"action": "chmod", "file_path": "ci/build.yml", "execute_filemode": True},
        {"action": "delete", "file_path": "ci/build.yml@team/app"},
    )
    violations = ci_config_violations(actions, "ci/build.yml@team/app", "team/app")
    assert [v.loc for v in violations] == [
        ("body", "file_actions", 0, "file_path"),
        ("body", "file_actions", 2, "previous_path"),
        ("body", "file_actions", 3, "file_path"),
        ("body", "file_actions", 4, "file_path"),
    ]
    assert {v.kind for v in violations} == {"path_blocked"}
    assert violations[0].message == (
        "path 'ci/build.yml' is the project's CI configuration file (GitLab's ci_config_path "
        "is 'ci/build.yml@team/app'), blocked by the path_blocklist entry '{ci_config_path}'"
    )


def test_an_unset_ci_config_path_blocks_the_default_file():
    (violation,) = ci_config_violations(
        _actions({"action": "delete", "file_path": ".gitlab-ci.yml"}), None, "team/app"
    )
    assert "ci_config_path is unset" in violation.message


def test_recent_findings_keep_the_newest_texts():
    """The route and submit_mr check one submission each: the second read is remembered."""
    recent = _RecentFindings(size=2)
    finding = SecretScan((SecretFinding(1, "GitLab Token"),), 1, complete=True)
    nothing = SecretScan((), 0, complete=True)
    recent.put(b"a", finding)
    recent.put(b"b", nothing)
    assert recent.get(b"a") == finding  # now the newest
    recent.put(b"c", nothing)
    assert recent.get(b"b") is None
    assert (recent.get(b"a"), recent.get(b"c")) == (finding, nothing)


def test_what_is_remembered_of_a_text_is_what_its_422_shows():
    """Five findings and a count, not every finding of every text remembered."""
    text = "".join(f"t{n} = {GITLAB}\n" for n in range(300))
    scan = scan_secrets(text)
    assert scan == SecretScan(
        tuple(SecretFinding(line, "GitLab Token") for line in range(1, 6)), 300, complete=True
    )
    assert scan_secrets(text) is scan


# --- bounds on scanning ----------------------------------------------------------------


class _CountingPattern:
    """A compiled pattern that counts the characters it is asked to search."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern.pattern
        self.flags = pattern.flags
        self._pattern = pattern
        self.read = 0

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        self.read += min(endpos, len(text)) - pos
        return self._pattern.search(text, pos, endpos)


def _costly_patterns(monkeypatch: pytest.MonkeyPatch) -> list[_CountingPattern]:
    """Counting stand-ins for AWS's second pattern and Mailchimp's, the two that try many
    places at every character (~0.45 and ~0.25 s per MiB of a plausible fill)."""
    counted: list[_CountingPattern] = []
    searches = []
    for detector, patterns in content_rules._SEARCHES:
        replaced = []
        for search in patterns:
            if detector.secret_type in {"AWS Access Key", "Mailchimp Access Key"} and (
                ".{0,20}?" in search.pattern.pattern or "-us" in search.pattern.pattern
            ):
                counting = _CountingPattern(search.pattern)
                counted.append(counting)
                replaced.append(dataclasses.replace(search, pattern=counting))
            else:
                replaced.append(search)
        searches.append((detector, tuple(replaced)))
    monkeypatch.setattr(content_rules, "_SEARCHES", tuple(searches))
    assert len(counted) == 2
    return counted


ADVERSARIAL_FILLS = {
    "awskey": "awskey" * 13,
    "aws password, too far from its quoted 40": "awspassword" + "x" * 21 + "'" + "A" * 40 + "'",
    "lowercase and digits": "abcdefgh12" * 20,
    "31 lowercase before -us1": "a" * 31 + "-us1",
}


@pytest.mark.parametrize("line", ADVERSARIAL_FILLS.values(), ids=ADVERSARIAL_FILLS.keys())
def test_the_costly_patterns_read_only_around_their_anchors(monkeypatch, line):
    text = (line + "\n") * (1_048_576 // (len(line) + 1))
    counted = _costly_patterns(monkeypatch)
    assert find_secrets(text) == []
    # At most one window of ~100 characters per line, never the whole MiB again.
    for pattern in counted:
        assert pattern.read <= 100 * text.count("\n"), pattern.pattern
    assert sum(pattern.read for pattern in counted) < len(text)


def test_ordinary_code_is_read_by_the_costly_patterns_only_around_quoted_hashes(monkeypatch):
    code = "\n".join(ORDINARY_CODE[:-1]) + "\n"  # one line quotes a 40-character hash
    text = code * (1_048_576 // len(code))
    counted = _costly_patterns(monkeypatch)
    assert find_secrets(text) == []
    assert sum(pattern.read for pattern in counted) <= 100 * text.count(code)


def _lines_like_tokens(count: int) -> str:
    return "".join(f"t{n} = {GITLAB}\n" for n in range(count))


def test_a_text_with_too_many_lines_like_tokens_is_refused_unscanned():
    content = (_lines_like_tokens(MAX_CANDIDATE_LINES + 1) + "plain\n").encode()
    assert scan_secrets(content.decode()).complete is False
    (violation,) = file_content_violations([FileContent(3, "data/tokens.txt", content)], REFUSE)
    assert violation.loc == ("body", "file_actions", 3, "content")
    assert violation.message.startswith(
        "data/tokens.txt could not be scanned for secrets within the limit "
        f"({MAX_CANDIDATE_LINES} lines, or {MAX_CANDIDATE_CHARACTERS} characters of lines, "
        "that look like a token); it is refused unscanned"
    )
    assert GITLAB not in violation.message


def test_as_many_lines_like_tokens_as_the_limit_are_still_scanned():
    scan = scan_secrets(_lines_like_tokens(MAX_CANDIDATE_LINES))
    assert (scan.count, scan.complete) == (MAX_CANDIDATE_LINES, True)


def test_a_long_line_like_a_token_is_refused_unscanned():
    text = "x" * MAX_CANDIDATE_CHARACTERS + f" {GITHUB}"
    (violation,) = text_secret_violations({("body", "description"): text}, REFUSE)
    assert violation.loc == ("body", "description")
    assert violation.message.startswith("description could not be scanned for secrets")


@pytest.mark.parametrize(
    ("before", "found"),
    [
        # The secret is the 1001st line put to a detector: the text is refused unscanned.
        pytest.param(_lines_like_tokens(MAX_CANDIDATE_LINES), False, id="tokens"),
        # Lines the AWS anchor finds but its pattern does not match: no detector is asked.
        pytest.param(("'" + "A" * 40 + "'\n") * 5000, True, id="near-misses"),
    ],
)
def test_a_secret_after_many_lines_like_tokens_is_never_accepted(before, found):
    text = before + f"key = {GITHUB}\n"
    (violation,) = text_secret_violations({("body", "description"): text}, REFUSE)
    assert violation.kind.value == "secret"
    line = text.count("\n")
    assert (f"line {line}: GitHub Token" in violation.message) is found
    assert ("could not be scanned" in violation.message) is not found
