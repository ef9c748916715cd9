"""Fixtures shared by the limits tests, which run against the real Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from tests.api.tcp_proxy import TcpProxy

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379


@pytest.fixture
def prefix() -> Iterator[str]:
    """A Redis key prefix of this test's own; its keys are deleted afterwards."""
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT)
    client.ping()  # the test needs the real Redis: fail, never skip
    name = f"aptix-test-{uuid.uuid4().hex}"
    yield name
    keys = list(client.scan_iter(f"{name}:*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def redis_proxy() -> Iterator[TcpProxy]:
    """The real Redis behind a forwarder the test can cut."""
    forwarder = TcpProxy(REDIS_HOST, REDIS_PORT)
    forwarder.start()
    try:
        yield forwarder
    finally:
        forwarder.close()
