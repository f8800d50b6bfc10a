"""Every module and file the docs name exists: a moved module cannot leave a stale guide.

In `docs/`, a backticked path ending in `.py` (relative to `src/workqueue/`, to
the repository, or `src/...`) must be a file, and a dotted `workqueue.…` name
must be a module or a name in one.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "workqueue"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
PATH = re.compile(r"`([\w./-]+\.py)(?::\w+)?`")
DOTTED = re.compile(r"`(workqueue(?:\.\w+)+)[`(:]")
# Paths a guide names as the reader's own, not ours (the add-an-item-type example).
EXAMPLES = ("types/notice/", "_notice_details.py")
# Dotted names that are no modules: a logger's and a span attribute's.
NOT_MODULES = frozenset({"workqueue.audit", "workqueue.item.id"})


def named_paths(text: str) -> set[str]:
    # A bare file name (`deps.py`, in a sentence about its package) names no place.
    return {
        path
        for path in PATH.findall(text)
        if "/" in path and not any(example in path for example in EXAMPLES)
    }


def path_exists(path: str) -> bool:
    return any(
        (base / path).is_file()
        for base in (PACKAGE, ROOT, ROOT / "src", ROOT / "tests", ROOT / "tests" / "support")
    )


def dotted_exists(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_module_a_doc_names_exists(doc):
    text = doc.read_text(encoding="utf-8")
    missing_paths = sorted(path for path in named_paths(text) if not path_exists(path))
    missing_names = sorted(
        name
        for name in set(DOTTED.findall(text))
        if name not in NOT_MODULES and "notice" not in name and not dotted_exists(name)
    )
    assert (missing_paths, missing_names) == ([], [])


def test_the_checker_tells_a_stale_name_from_a_live_one():
    assert path_exists("queue/processing/manager.py")
    assert not path_exists("queue/processing.py")
    assert dotted_exists("workqueue.queue.enqueue.mark_actionable")
    assert not dotted_exists("workqueue.queue.repository")
    assert named_paths("see `queue/intake/pending_events.py:ingest_event`") == {
        "queue/intake/pending_events.py"
    }
