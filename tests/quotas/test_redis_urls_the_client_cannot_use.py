"""Redis URLs that parse but that the client cannot use stop start-up; unix:// ones work.

``?ssl_cert_reqs=none`` (as hosted Redis providers print it) on a ``redis://`` URL, or
``?timeout=5``, passed the parse made at start-up, then failed every call to Redis with a
``TypeError``, read as an outage that never ended: the limits stayed off (``open``) or refused
everything (``closed``). A ``unix://`` URL passed validation, then start-up died with a
traceback (``limits`` took it for valkey).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aptix.errors import ConfigurationError
from aptix.quotas import Quotas
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings, load_settings
from tests.quotas.conftest import REDIS_HOST, REDIS_PORT

REDIS = f"redis://{REDIS_HOST}:{REDIS_PORT}"


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (
            "ssl_cert_reqs=none",
            "has the query option 'ssl_cert_reqs', which the Redis client does not take in a "
            "redis:// URL (TLS options need a rediss:// URL)",
        ),
        ("timeout=5", "has the query option 'timeout'"),
        ("ssl=true", "has the query option 'ssl'"),
    ],
)
def test_a_query_option_the_client_does_not_take_is_one_line_without_the_url(
    monkeypatch: pytest.MonkeyPatch, query: str, reason: str
) -> None:
    monkeypatch.setenv("APTIX_REDIS_URL", f"redis://:s3cret@127.0.0.1:6379/3?{query}")
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    line = raised.value.one_line()
    assert line.startswith("Invalid settings: APTIX_REDIS_URL: ")
    assert reason in line
    assert "s3cret" not in line
    assert "\n" not in line


def test_tls_options_on_a_rediss_url_are_accepted() -> None:
    url = "rediss://:pw@redis.example:6380/0?ssl_cert_reqs=none"
    assert AptixSettings(redis_url=url).redis_url is not None


async def test_the_start_up_check_refuses_a_url_the_client_cannot_use(prefix: str) -> None:
    # Quotas built without the settings' check: the start-up ping still stops start-up.
    quotas = Quotas(rate_limit="3/minute", redis_url=f"{REDIS}/0?timeout=5", key_prefix=prefix)
    with pytest.raises(ConfigurationError) as raised:
        await quotas.check()
    assert "APTIX_REDIS_URL: the Redis client cannot use the URL (TypeError)" in str(raised.value)


def test_serve_stops_with_one_line_on_a_tls_option_in_a_redis_url(
    tmp_path: Path, prefix: str
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("APTIX_", "OTEL_"))},
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_SEMANTIC_MATCHING": "false",
        "APTIX_LOAD_PLUGINS": "false",
        "APTIX_RATE_LIMIT": "3/minute",
        "APTIX_REDIS_URL": f"{REDIS}/0?ssl_cert_reqs=none",
        "APTIX_REDIS_KEY_PREFIX": prefix,
    }
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "serve", "--port", "19302"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: Invalid settings: APTIX_REDIS_URL: ")
    assert "has the query option 'ssl_cert_reqs'" in lines[0]


@pytest.fixture
def unix_redis(tmp_path: Path) -> Iterator[Path]:
    """A Redis of this test's own, listening on a unix socket only."""
    socket = tmp_path / "redis.sock"
    server = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", str(socket), "--save", "''"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not socket.exists():
            assert server.poll() is None, "redis-server did not start"
            assert time.monotonic() < deadline, "redis-server did not open its socket"
            time.sleep(0.05)
        yield socket
    finally:
        server.terminate()
        server.wait(timeout=10)


async def test_limits_count_in_a_redis_reached_over_a_unix_socket(
    tmp_path: Path, unix_redis: Path
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        rate_limit="2/minute",
        redis_url=f"unix://{unix_redis}?db=3",
    )
    async with open_runtime(settings) as runtime:
        assert await runtime.quotas.request("key-1") is None
        assert await runtime.quotas.request("key-1") is None
        refused = await runtime.quotas.request("key-1")
        assert refused is not None
        assert refused.code == "rate_limited"
        assert runtime.quotas.redis_up is True
