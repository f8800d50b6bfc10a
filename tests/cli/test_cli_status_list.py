"""`status` as a list: one line per item within 80 columns, `--wide` in full; the program's help."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from importlib.metadata import version

import pytest
from cli_client_support import api_submit, module_service, run_cli
from rich.console import Console

from workqueue.cli.client_table import age, list_view

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LONG_PROJECT = "platform/packages/kernel-tools"
LONG_BRANCH = "workqueue/sync-kernel-6.12.3-upstream"
MR_URL = f"https://gitlab.example.com/{LONG_PROJECT}/-/merge_requests/1234"
ERROR = "GitLab refused the commit: A file with this name already exists\nsecond line"


def _item(number: int, phase: str, age_seconds: int, error: str | None = None, **details):
    return {
        "id": f"{number:08d}-d030-4e53-8322-8b53e5581b07",
        "item_type": details.pop("item_type", "mr"),
        "phase": phase,
        "error": error,
        "created_at": (NOW - timedelta(seconds=age_seconds)).isoformat(),
        "details": details,
    }


REALISTIC = [
    _item(
        1,
        "completed",
        3_700,
        project=LONG_PROJECT,
        source_branch=LONG_BRANCH,
        mr_iid=1234,
        mr_url=MR_URL,
        completion_reason="merged",
    ),
    _item(
        2,
        "active",
        45,
        project="demo/widgets",
        source_branch="workqueue/held-back",
        mr_iid=2,
        merge_blocker={
            "code": "auto_merge_disabled",
            "message": "auto_merge is off for this item: a person merges the MR",
            "since": NOW.isoformat(),
        },
    ),
    _item(
        3,
        "failed",
        3 * 86_400,
        error=ERROR,
        project="infra/very-long-group-name/subgroup/deploy-config",
        source_branch="workqueue/bump",
    ),
    _item(
        4,
        "active",
        600,
        item_type="trunk",
        queue="group/app:main",
        sha="0123456789abcdef0123456789abcdef01234567",
    ),
]


def _render(width: int, *, wide: bool = False) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(list_view(REALISTIC, width=width, wide=wide, now=NOW))
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_list_gives_each_item_one_line_within_the_terminal(width):
    lines = _render(width)
    assert max(len(line) for line in lines) <= width
    assert len(lines) == 2 + len(REALISTIC)  # heading, rule, one line per item
    heading = lines[0].split()
    assert heading[:7] == ["id", "type", "phase", "project", "branch", "MR", "age"]
    assert lines[0].rstrip().endswith("error / blocker")
    merged, held, failed, trunk = lines[2:]
    assert merged.startswith("00000001  mr     completed")
    assert "!1234" in merged
    assert " 1h " in merged
    assert "merged" in merged
    assert "!2" in held
    assert " 45s " in held
    assert "auto_merge" in held
    assert " 3d " in failed
    assert "GitLab refus" in failed
    assert "second line" not in failed
    assert "00000004  trunk" in trunk
    assert "01234567" in trunk
    assert "group/app" in trunk
    assert "main" in trunk


def test_a_value_too_long_for_its_column_keeps_its_distinctive_end():
    merged = _render(80)[2]
    # The project's group and the branch's common prefix give way first.
    assert "…" in merged
    assert "tools" in merged
    assert "upstream" in merged


def test_wide_shows_every_value_in_full():
    text = "\n".join(_render(400, wide=True))
    for value in (
        REALISTIC[0]["id"],
        LONG_PROJECT,
        LONG_BRANCH,
        MR_URL,
        "auto_merge_disabled: auto_merge is off for this item: a person merges the MR",
        "infra/very-long-group-name/subgroup/deploy-config",
        "0123456789abcdef0123456789abcdef01234567",
        "second line",
    ):
        assert value in text, value


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (59, "59s"), (60, "1m"), (3_599, "59m"), (3_600, "1h"), (86_400 * 12, "12d")],
)
def test_ages_are_in_their_largest_whole_unit(seconds, shown):
    assert age((NOW - timedelta(seconds=seconds)).isoformat(), NOW) == shown


def test_an_unreadable_creation_time_has_no_age():
    assert age("yesterday", NOW) == ""
    assert age(None, NOW) == ""


def test_version_and_flags_in_help():
    shown = run_cli("--version", url=None)
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout == f"workqueue-service {version('workqueue-service')}\n"

    for command in (("status",), ("submit",), ("cancel",), ("demo",), ("serve",)):
        helped = run_cli(*command, "--help", url=None, COLUMNS="120")
        assert helped.returncode == 0, helped.stderr
        assert "<bool>" not in helped.stdout, command
    status_help = run_cli("status", "--help", url=None, COLUMNS="120").stdout
    assert re.search(r"--json\s+Print the service's JSON answer", status_help)
    assert re.search(r"--wide\s+List: full ids", status_help)
    assert "http://127.0.0.1:8080" in status_help  # the default URL is named
    assert re.search(r"--limit\s+<int range>", status_help)  # options with values keep them


@pytest.fixture(scope="module")
def service(server_url, template_url):
    yield from module_service(server_url, template_url)


def test_the_real_list_fits_80_columns_and_wide_shows_full_ids(service):
    package = "pkg-status-list"
    items = [api_submit(service, package=package) for _ in range(2)]
    compact = run_cli("status", "--package", package, url=service.url, COLUMNS="80")
    assert compact.returncode == 0, compact.stderr
    lines = compact.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert len(lines) == 2 + len(items)
    for item in items:
        assert item["id"][:8] in compact.stdout
        assert item["id"] not in compact.stdout

    wide = run_cli("status", "--package", package, "--wide", url=service.url, COLUMNS="200")
    assert wide.returncode == 0, wide.stderr
    for item in items:
        assert item["id"] in wide.stdout
        assert item["details"]["source_branch"] in wide.stdout

    one = run_cli("status", "--id", items[0]["id"], "--wide", url=service.url)
    assert one.returncode == 2
    assert one.stderr == "error: --id shows one item: it takes no list filters\n"


def test_an_agent_task_shows_its_thread_and_state():
    task = _item(
        5,
        "active",
        30,
        item_type="agent",
        project="demo/widgets",
        noteable_type="issue",
        noteable_iid=12,
        note_url="https://gitlab.example.com/demo/widgets/-/issues/12#note_3",
        state="calling",
    )
    console = Console(width=100, record=True, color_system=None)
    console.print(list_view([task], width=100, wide=False, now=NOW))
    [line] = [line for line in console.export_text().splitlines() if "agent" in line]
    assert "#12" in line
    assert "calling" in line
    wide = Console(width=200, record=True, color_system=None)
    wide.print(list_view([task], width=200, wide=True, now=NOW))
    assert "issues/12#note_3" in wide.export_text()
