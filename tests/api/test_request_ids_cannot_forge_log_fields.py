"""A caller's ``X-Request-ID`` is kept only when it is made of safe characters: otherwise its
text (``] session_id=…``) could pose, in a plain-text log line, as another org's ids."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator

import httpx
import pytest

from aptix.api.metrics import MAX_REQUEST_ID
from aptix.log_setup import LogContextFilter, PlainFormatter
from aptix.testing import ScriptedModel, reply

FORGED = "acme-req-1] session_id=s-of-acme turn_id=t-of-acme [AgentReasoner_ToolCall] x"


@pytest.fixture
def plain_log() -> Iterator[io.StringIO]:
    """What the ``aptix`` logger writes in plain text, at DEBUG, while the test runs."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(PlainFormatter())
    handler.addFilter(LogContextFilter("-"))
    logger = logging.getLogger("aptix")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.mark.parametrize(
    "sent",
    [
        FORGED,
        'req "quoted"',
        "req=1",
        "req[1]",
        "req\u00e9",  # a character beyond ASCII
    ],
)
async def test_an_unsafe_request_id_is_replaced_by_a_new_one(
    client: httpx.AsyncClient, sent: str
) -> None:
    answered = await client.get("/healthz", headers={"X-Request-ID": sent.encode()})
    used = answered.headers["x-request-id"]
    assert used != sent
    assert re.fullmatch(r"[0-9a-f]{32}", used)  # the middleware's own kind of id


@pytest.mark.parametrize(
    "sent",
    ["req-42", "0b6f8a3c-52d7-4f5e-9a0b-2c7d9e1f4a6b", "lb/01HX:7.trace_id+x", "a" * 100],
)
async def test_a_safe_request_id_is_kept(client: httpx.AsyncClient, sent: str) -> None:
    answered = await client.get("/healthz", headers={"X-Request-ID": sent})
    assert answered.headers["x-request-id"] == sent


async def test_a_long_safe_request_id_is_shortened(client: httpx.AsyncClient) -> None:
    answered = await client.get("/healthz", headers={"X-Request-ID": "r" * 500})
    assert answered.headers["x-request-id"] == "r" * MAX_REQUEST_ID


async def test_a_forged_request_id_shows_in_no_log_line(
    client: httpx.AsyncClient, model: ScriptedModel, plain_log: io.StringIO
) -> None:
    model.add(reply("Hi."))
    sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]
    answered = await client.post(
        "/v1/agent/execute",
        json={"sessionId": sid, "instruction": "hi"},
        headers={"X-Request-ID": FORGED},
    )
    assert answered.status_code == 200, answered.text
    used = answered.headers["x-request-id"]
    log = plain_log.getvalue()
    assert f" [{used}] session_id={sid} turn_id=" in log  # the turn's own lines
    assert "s-of-acme" not in log
    assert "acme-req-1" not in log
