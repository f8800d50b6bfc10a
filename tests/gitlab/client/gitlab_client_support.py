"""Constants and helpers shared by the GitLab client tests (imported by plain name)."""

from __future__ import annotations

# Distinctive, so a test can prove it never shows up in an error.
TOKEN = "glpat-SeCrEt-token-4711"
PROJECT = "acme/platform/widgets"
FILES = {
    "README.md": "# widgets\n",
    "requirements.txt": "requests==2.31.0\nflask==3.0.0\n",
    "src/app.py": "print('hello')\n",
}
TIMEOUT = 5.0


class CallLog:
    """Collects `on_call(operation, status)` reports."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int | str]] = []

    def __call__(self, operation: str, status: int | str) -> None:
        self.calls.append((operation, status))
