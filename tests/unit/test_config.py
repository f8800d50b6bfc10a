from __future__ import annotations

import pytest
from pydantic import ValidationError

from workqueue.config import ConfigError, load_config
from workqueue.db.url import InvalidDatabaseURLError, mask_password, normalize_database_url
from workqueue.queue.processing.config import ProcessingConfig


def test_processing_defaults_match_the_contract():
    config = ProcessingConfig()
    assert (config.workers, config.lease_seconds, config.heartbeat_seconds) == (10, 60, 20)
    assert (config.item_deadline_seconds, config.safety_sweep_seconds) == (60, 300)
    assert (config.max_attempts, config.backoff_initial_seconds, config.backoff_max_seconds) == (
        5,
        1,
        300,
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"heartbeat_seconds": 21}, "heartbeat_seconds must be at most lease_seconds / 3"),
        ({"workers": 0}, "greater than or equal to 1"),
        ({"backoff_initial_seconds": 10, "backoff_max_seconds": 5}, "backoff_max_seconds"),
        ({"lease_seconds": 0}, "greater than 0"),
        ({"wrokers": 3}, "Extra inputs are not permitted"),
    ],
)
def test_processing_rejects_bad_values(values, message):
    with pytest.raises(ValidationError, match=message):
        ProcessingConfig(**values)


def test_config_file_errors_name_the_file_and_the_field(tmp_path):
    path = tmp_path / "config.yml"
    with pytest.raises(ConfigError, match=f"{path}: configuration file not found"):
        load_config(path)
    path.write_text("processing:\n  workers: many\n")
    with pytest.raises(ConfigError, match=r"config.yml: processing\.workers: Input should be"):
        load_config(path)
    path.write_text("processing: {}\nsurprise: 1\n")
    with pytest.raises(ConfigError, match="surprise: Extra inputs are not permitted"):
        load_config(path)
    path.write_text("processing: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(path)


def test_config_file_loads(tmp_path):
    path = tmp_path / "config.yml"
    path.write_text("processing:\n  workers: 3\nhandled_types:\n  sample:\n")
    config = load_config(path)
    assert config.processing.workers == 3
    assert config.handled_types == {"sample": None}


@pytest.mark.parametrize(
    ("raw", "driver"),
    [
        ("postgresql://u:p@h/db", "postgresql+psycopg"),
        ("postgres://u:p@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg://u:p@h/db", "postgresql+psycopg"),
    ],
)
def test_accepted_database_url_schemes(raw, driver):
    assert normalize_database_url(raw).drivername == driver


@pytest.mark.parametrize("raw", ["mysql://u:secret@h/db", "sqlite:///x.db", "h/db"])
def test_other_schemes_are_refused_without_echoing_the_password(raw):
    with pytest.raises(InvalidDatabaseURLError) as caught:
        normalize_database_url(raw)
    assert "secret" not in str(caught.value)


def test_mask_password():
    assert mask_password("postgresql://user:hunter2@db:5432/app") == (
        "postgresql://user:***@db:5432/app"
    )
