"""The warning that a caller's ``X-Request-ID`` was replaced carries the new id, as every line
of the request does, so that searching the log by the id the caller got back finds it."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import httpx
import pytest

from aptix.log_setup import JsonLinesFormatter, LogContextFilter, PlainFormatter

BAD = "acme-req-1] session_id=s-of-acme\x1b[2J"


@pytest.fixture
def middleware_log() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """What the ``asgi_correlation_id`` logger writes, in plain text and in JSON lines."""
    plain, lines = io.StringIO(), io.StringIO()
    handlers = []
    for out, formatter, missing in (
        (plain, PlainFormatter(), "-"),
        (lines, JsonLinesFormatter(), None),
    ):
        handler = logging.StreamHandler(out)
        handler.setFormatter(formatter)
        handler.addFilter(LogContextFilter(missing))
        handlers.append(handler)
    logger = logging.getLogger("asgi_correlation_id")
    for handler in handlers:
        logger.addHandler(handler)
    try:
        yield plain, lines
    finally:
        for handler in handlers:
            logger.removeHandler(handler)


@pytest.mark.parametrize("sent", [BAD, "abc def", "x]y", "session_id=evil"])
async def test_the_warning_of_a_replaced_request_id_carries_the_new_id(
    client: httpx.AsyncClient, middleware_log: tuple[io.StringIO, io.StringIO], sent: str
) -> None:
    plain, lines = middleware_log
    answered = await client.get("/healthz", headers={"X-Request-ID": sent.encode()})
    used = answered.headers["x-request-id"]
    assert used != sent
    (plain_line,) = plain.getvalue().splitlines()
    assert f" WARNING asgi_correlation_id [{used}] " in plain_line
    assert used in plain_line.split("] ", 1)[1]  # the message names it too
    (json_line,) = lines.getvalue().splitlines()
    record = json.loads(json_line)
    assert record["level"] == "warning"
    assert record["request_id"] == used
    assert used in record["message"]
    for line in (plain_line, json_line):
        assert sent not in line  # the caller's text is not echoed
        assert "s-of-acme" not in line
        assert "\x1b" not in line


async def test_a_kept_or_missing_request_id_logs_no_warning(
    client: httpx.AsyncClient, middleware_log: tuple[io.StringIO, io.StringIO]
) -> None:
    await client.get("/healthz", headers={"X-Request-ID": "req-42"})
    await client.get("/healthz")
    assert middleware_log[0].getvalue() == middleware_log[1].getvalue() == ""
