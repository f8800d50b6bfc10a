"""The image sets WORKQUEUE_SERVICE_REQUIRE_DATABASE_URL=1: without DATABASE_URL, one line, exit 2.

Without the variable, `serve` and `migrate` would try to start an embedded
PostgreSQL, which a read-only container cannot do (and should not try).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "workqueue"]


def _run(arguments: list[str], **environment: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "WORKQUEUE_SERVICE_REQUIRE_DATABASE_URL"}
    }
    env.update(environment)
    return subprocess.run(
        [*CLI, *arguments], capture_output=True, text=True, env=env, timeout=60, check=False
    )


@pytest.mark.parametrize("command", [["serve"], ["migrate"]])
def test_without_database_url_the_image_stops_with_one_line(tmp_path, command):
    data_dir = tmp_path / "data"
    result = _run(
        [*command, "--data-dir", str(data_dir)],
        WORKQUEUE_SERVICE_REQUIRE_DATABASE_URL="1",
        WORKQUEUE_SERVICE_CONFIG=str(tmp_path / "absent.yml"),
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        (
            "error: DATABASE_URL is not set, and WORKQUEUE_SERVICE_REQUIRE_DATABASE_URL says "
            "this installation does not run an embedded PostgreSQL: set DATABASE_URL"
        )
    ]
    assert not data_dir.exists()  # no embedded cluster was started or even prepared


def test_an_empty_database_url_counts_as_unset(tmp_path):
    result = _run(
        ["migrate", "--data-dir", str(tmp_path / "data")],
        WORKQUEUE_SERVICE_REQUIRE_DATABASE_URL="1",
        DATABASE_URL="",
    )
    assert result.returncode == 2
    assert "DATABASE_URL is not set" in result.stderr


def test_zero_switches_the_requirement_off(tmp_path):
    # The config is missing, which `serve` reports next: proof it went past the check.
    result = _run(
        ["serve", "--data-dir", str(tmp_path / "data")],
        WORKQUEUE_SERVICE_REQUIRE_DATABASE_URL="0",
        WORKQUEUE_SERVICE_CONFIG=str(tmp_path / "absent.yml"),
    )
    assert result.returncode == 2
    assert "configuration file not found" in result.stderr
    assert "DATABASE_URL is not set" not in result.stderr
