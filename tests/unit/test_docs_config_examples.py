"""The `authorization:`, `signals:` and `checks:` examples in the docs are valid configuration
(they are copied)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from workqueue.auth import AuthorizationConfig
from workqueue.signals.config import ChecksConfig
from workqueue.signals.sources import SignalsConfig

DOCS = Path(__file__).resolve().parents[2] / "docs"
_YAML_BLOCK = re.compile(r"```yaml\n(.*?)```", re.DOTALL)


def authorization_examples() -> list[tuple[str, str]]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        for number, block in enumerate(_YAML_BLOCK.findall(path.read_text())):
            if re.search(r"^authorization:", block, re.MULTILINE):
                found.append((f"{path.relative_to(DOCS)}#{number}", block))
    return found


EXAMPLES = authorization_examples()


def test_the_docs_have_authorization_examples() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("block", [block for _, block in EXAMPLES], ids=[n for n, _ in EXAMPLES])
def test_authorization_examples_validate(block: str) -> None:
    document = yaml.safe_load(block)
    AuthorizationConfig.model_validate(document["authorization"])


def section_examples(section: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        for number, block in enumerate(_YAML_BLOCK.findall(path.read_text())):
            if re.search(rf"^{section}:", block, re.MULTILINE):
                found.append((f"{path.relative_to(DOCS)}#{number}", block))
    return found


SIGNALS = section_examples("signals")
CHECKS = [(name, block) for name, block in section_examples("handled_types") if "checks:" in block]


def test_the_docs_have_signals_and_checks_examples() -> None:
    assert len(SIGNALS) >= 4
    assert len(CHECKS) >= 2


@pytest.mark.parametrize("block", [block for _, block in SIGNALS], ids=[n for n, _ in SIGNALS])
def test_signals_examples_validate(block: str) -> None:
    SignalsConfig.model_validate(yaml.safe_load(block)["signals"])


@pytest.mark.parametrize("block", [block for _, block in CHECKS], ids=[n for n, _ in CHECKS])
def test_checks_examples_validate(block: str) -> None:
    ChecksConfig.model_validate(yaml.safe_load(block)["handled_types"]["mr"]["checks"])
