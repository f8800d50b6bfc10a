"""`pip install` of the package and of each extra without uv.lock, as a user installs it.

Each install goes into a fresh venv of the running Python with the pip that this
Python bundles (ensurepip; 23.2 on Python 3.11), never upgraded: the OpenTelemetry
extra once failed there with ResolutionImpossible while a newer pip resolved it.
The package is the wheel built from this checkout, as a package index would serve it.
"""

from __future__ import annotations

import ensurepip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.installs

ROOT = Path(__file__).resolve().parents[2]
# Not part of the package; some (.venv, .uv) are large.
NOT_SOURCE = (".git", ".venv", ".uv", ".data", "build", "dist", "*.egg-info", "__pycache__")
# extra -> a module each of its packages brings (imported once installed)
EXTRAS = {
    "": ["workqueue.cli.main"],
    "s3": ["boto3"],
    "otel": [
        "opentelemetry.sdk.trace",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "opentelemetry.instrumentation.fastapi",
        "opentelemetry.instrumentation.requests",
        "opentelemetry.instrumentation.psycopg",
    ],
    "sentry": ["sentry_sdk"],
    "bench": ["pgqueuer", "procrastinate"],
    "dev": ["pytest", "xdist", "pytest_randomly", "kubernetes_validate", "mkdocs", "playwright"],
}


def _run(command: list[str | Path], **options) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, check=False, **options
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def _fresh_venv(directory: Path) -> Path:
    """The venv's python; its pip is the bundled one, checked."""
    _run([sys.executable, "-m", "venv", directory])
    python = directory / "bin" / "python"
    version = _run([python, "-m", "pip", "--version"]).stdout
    assert version.startswith(f"pip {ensurepip.version()} "), version
    return python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The package as a wheel, built from a copy of the checkout by the bundled pip."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    python = _fresh_venv(base / "venv")
    _run([python, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", base / "dist", source])
    [built] = (base / "dist").glob("workqueue_service-*.whl")
    return built


@pytest.mark.parametrize("extra", list(EXTRAS), ids=lambda extra: extra or "service")
def test_the_package_and_the_extra_install_with_the_bundled_pip(wheel, tmp_path, extra):
    python = _fresh_venv(tmp_path / "venv")
    requirement = f"{wheel}[{extra}]" if extra else str(wheel)
    _run([python, "-m", "pip", "install", "--quiet", requirement])
    _run([python, "-m", "pip", "check"])
    _run([python, "-c", "; ".join(f"import {module}" for module in EXTRAS[extra])], cwd=tmp_path)
