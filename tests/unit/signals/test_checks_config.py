"""`handled_types.mr.checks`: what the config accepts and refuses, with the reason."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workqueue.signals.config import ChecksConfig


def test_the_documented_example_is_accepted():
    checks = ChecksConfig.model_validate(
        {
            "before_merge": ["scan"],
            "after_merge": [
                {"name": "build", "variants": ["api", "worker"], "settle_seconds": 120}
            ],
        }
    )
    (build,) = checks.after_merge
    assert (build.name, build.variants, build.timeout_seconds) == ("build", ["api", "worker"], 7200)


@pytest.mark.parametrize(
    ("section", "reason"),
    [
        ({"before_merge": ["Build"]}, "should match pattern"),
        ({"before_merge": ["scan", "scan"]}, "before_merge names must be unique"),
        ({"after_merge": [{"name": "b"}, {"name": "b"}]}, "after_merge names must be unique"),
        ({"after_merge": [{"name": "b", "variants": ["x", "x"]}]}, "variants must be unique"),
        ({"after_merge": [{"name": "b", "variants": ["-x"]}]}, "should match pattern"),
        ({"after_merge": [{"name": "b", "timeout_seconds": 0}]}, "greater than 0"),
        ({"after_merge": [{"name": "b", "settle": 1}]}, "Extra inputs"),
    ],
)
def test_mistakes_are_refused_with_a_reason(section, reason):
    with pytest.raises(ValidationError, match=reason):
        ChecksConfig.model_validate(section)
