"""The herder's settings in `handled_types.mr.ci_retry`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workqueue.types.mr.config import MAX_LOG_TAIL_BYTES, CIRetryConfig, MRTypeConfig


def test_defaults():
    config = CIRetryConfig()
    assert config.log_tail_bytes == 65_536
    assert (config.circuit_breaker.max_retries, config.circuit_breaker.window_seconds) == (20, 600)
    (rule,) = config.rules
    assert "script_failure" not in rule.failure_reason
    assert "runner_system_failure" in rule.failure_reason


def test_settings_are_read_from_the_section():
    config = MRTypeConfig.model_validate(
        {
            "ci_retry": {
                "log_tail_bytes": 4096,
                "circuit_breaker": {"max_retries": 5, "window_seconds": 30.5},
                "rules": [{"name": "oom", "log_patterns": ["Killed"], "retry_delays": [1, 2]}],
            }
        }
    ).ci_retry
    assert config.log_tail_bytes == 4096
    assert (config.circuit_breaker.max_retries, config.circuit_breaker.window_seconds) == (5, 30.5)
    assert config.rules[0].retry_delays == [1, 2]


@pytest.mark.parametrize(
    "section",
    [
        {"log_tail_bytes": 0},
        {"log_tail_bytes": MAX_LOG_TAIL_BYTES + 1},
        {"circuit_breaker": {"max_retries": 0}},
        {"circuit_breaker": {"window_seconds": 0}},
        {"circuit_breaker": {"window_minutes": 10}},  # unknown keys are errors
        {"breaker": {}},
    ],
)
def test_invalid_settings_are_rejected(section):
    with pytest.raises(ValidationError):
        CIRetryConfig.model_validate(section)
