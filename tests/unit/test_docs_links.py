"""Every relative link in `docs/`, `README.md`, `CHANGELOG.md` and `SECURITY.md` names a
file of the repository, so it works where people read it: on the forge, in a clone, and
in the built site."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    *(ROOT / name for name in ("README.md", "CHANGELOG.md", "SECURITY.md")),
    *sorted((ROOT / "docs").rglob("*.md")),
]
# [text](target) and [text]: target, outside code; a target is what precedes a title.
_INLINE = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")


def relative_links(page: Path) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", page.read_text()))
    targets = _INLINE.findall(text) + _REFERENCE.findall(text)
    return [
        target
        for target in targets
        if not re.match(r"^(?:[a-z][a-z0-9+.-]*:|#|//)", target, re.IGNORECASE)
    ]


def broken(page: Path) -> list[str]:
    missing = []
    for target in relative_links(page):
        path = target.split("#", 1)[0].split("?", 1)[0]
        if not path:
            continue
        if not (page.parent / path).resolve().exists():
            missing.append(target)
    return missing


def test_the_pages_have_relative_links():
    assert sum(len(relative_links(page)) for page in PAGES) > 100


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_names_a_file(page):
    assert broken(page) == []
