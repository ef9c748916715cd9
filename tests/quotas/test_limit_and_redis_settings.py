"""Limits and a Redis URL that cannot mean what they say stop start-up with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from aptix.errors import ConfigurationError
from aptix.settings import AptixSettings, load_settings

#: The machine's Redis (tests/tenancy/test_limits_redis.py uses it too).
REDIS = "redis://127.0.0.1:6379"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("0/minute", "allows nothing"),
        ("0 per day", "allows nothing"),
        ("5/0 minute", "has a window of 0"),
        ("5 per 0 seconds", "has a window of 0"),
    ],
)
@pytest.mark.parametrize("variable", ["APTIX_RATE_LIMIT", "APTIX_TOKEN_BUDGET"])
def test_a_limit_of_zero_requests_or_a_zero_window_is_refused(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, reason: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    line = raised.value.one_line()
    assert f"{variable}: " in line
    assert f"{value!r} {reason}" in line
    assert "\n" not in line


@pytest.mark.parametrize("value", ["1/minute", "5 per 10 seconds", "2000000/day", "3/2 hours"])
def test_limits_with_a_count_and_a_window_are_accepted(value: str) -> None:
    assert AptixSettings(rate_limit=value, token_budget=value).rate_limit == value


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("redis://:s3cret@127.0.0.1:notaport/4", "has a port that is not a number"),
        ("redis://127.0.0.1:99999/4", "has a port that is not a number"),
        ("redis://:s3cret@127.0.0.1:6379/notadb", "names a database that is not a number"),
        ("redis://127.0.0.1:6379/0?db=s3cret", "Invalid value for 'db'"),
        ("unix:///run/redis.sock?db=s3cret", "Invalid value for 'db'"),
    ],
)
def test_a_redis_url_the_client_cannot_read_is_one_line_without_the_url(
    monkeypatch: pytest.MonkeyPatch, url: str, reason: str
) -> None:
    monkeypatch.setenv("APTIX_REDIS_URL", url)
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    line = raised.value.one_line()
    assert line.startswith("Invalid settings: APTIX_REDIS_URL: ")
    assert reason in line
    assert "s3cret" not in line


@pytest.mark.parametrize(
    "url", ["redis://h:6379/15", "redis://h/", "rediss://u:p@h/3", "unix:///s"]
)
def test_redis_urls_the_client_reads_are_accepted(url: str) -> None:
    assert AptixSettings(redis_url=url).redis_url is not None


def test_serve_stops_with_one_line_when_redis_refuses_the_urls_database(tmp_path: Path) -> None:
    redis.Redis.from_url(REDIS).ping()  # the test needs the real Redis: fail, never skip
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("APTIX_", "OTEL_"))},
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_SEMANTIC_MATCHING": "false",
        "APTIX_LOAD_PLUGINS": "false",
        "APTIX_RATE_LIMIT": "10/minute",
        "APTIX_REDIS_URL": f"{REDIS}/99999",  # a default Redis has databases 0-15
    }
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "serve", "--port", "19402"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "error: APTIX_REDIS_URL: Redis refuses the connection (DB index is out of range)."
    )
