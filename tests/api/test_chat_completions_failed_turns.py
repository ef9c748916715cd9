"""How a failed turn answers an OpenAI client: only a failing model endpoint is a 502.

A request over the context budget is 400 ``context_length_exceeded`` and a token budget spent
during the turn is 429 with ``Retry-After``: the ``openai`` client does not retry either (a
retry could not succeed, and each would start a session). A failing model endpoint is 502,
and no caller learns the endpoint's address.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.llm.openai_client import OpenAiLlmClient
from aptix.llm.types import LlmClient
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, call, reply
from aptix.testing.server import Fail, ScriptedOpenAIServer

HEADER = "X-Aptix-Session"


async def _served(
    tmp_path: Path, model: LlmClient, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    config = AptixSettings(data_dir=tmp_path, load_plugins=False, **settings)
    async with open_runtime(config) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=model))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1/v1") as http:
            yield http


def _sdk(http: httpx.AsyncClient, retries: int = 0) -> AsyncOpenAI:
    return AsyncOpenAI(
        api_key="unused", base_url="http://127.0.0.1/v1", http_client=http, max_retries=retries
    )


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def llm_log() -> Iterator[_Lines]:
    # The "aptix" loggers do not propagate to the root logger pytest captures.
    lines, logger = _Lines(), logging.getLogger("aptix.llm")
    logger.addHandler(lines)
    yield lines
    logger.removeHandler(lines)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


async def test_a_request_over_the_context_budget_is_a_400_not_retried(tmp_path: Path) -> None:
    async for http in _served(tmp_path, ScriptedModel(), llm_context_tokens=256):
        with pytest.raises(openai.BadRequestError) as refused:
            await _sdk(http, retries=2).chat.completions.create(
                model="aptix-general", messages=[{"role": "user", "content": "word " * 2000}]
            )
        assert refused.value.code == "context_length_exceeded"
        assert refused.value.response.headers[HEADER]
        assert len((await http.get("/sessions")).json()) == 1  # one attempt, one session


async def test_a_token_budget_spent_during_the_turn_is_a_429(tmp_path: Path) -> None:
    # The first model call spends the whole budget (15 tokens); the second is refused.
    model = ScriptedModel([reply(None, call("agent_calculator", {"expression": "1+1"}))])
    async for http in _served(tmp_path, model, token_budget="15/day"):
        response = await http.post(
            "/chat/completions",
            json={"model": "aptix-calculation", "messages": [{"role": "user", "content": "1+1"}]},
        )
        assert response.status_code == 429, response.text
        assert response.json()["error"]["code"] == "token_budget_exhausted"
        assert int(response.headers["Retry-After"]) > 0
        assert response.headers[HEADER]


async def test_a_turn_stopped_by_the_iteration_cap_is_a_422_not_retried(tmp_path: Path) -> None:
    # Its tool ran: the turn's own limit stopped it, not the model endpoint, and a retry
    # would run the tool again.
    model = ScriptedModel([reply("Checking.", call("agent_calculator", {"expression": "1+1"}))])
    async for http in _served(tmp_path, model, max_iterations=1):
        with pytest.raises(openai.UnprocessableEntityError) as stopped:
            await _sdk(http, retries=2).chat.completions.create(
                model="aptix-calculation", messages=[{"role": "user", "content": "1+1"}]
            )
        assert stopped.value.code == "iteration_cap"
        assert "Stopped after 1 model calls without a final answer" in stopped.value.message
        assert len(model.requests) == 1


async def test_a_failing_model_endpoint_is_a_502_without_its_address(
    tmp_path: Path, server: ScriptedOpenAIServer, llm_log: _Lines
) -> None:
    model = OpenAiLlmClient(base_url=server.base_url, api_key="k", model="m", max_retries=0)
    server.add(Fail(500, "boom"), Fail(500, "boom"), Fail(500, "boom"))
    ask = {"role": "user", "content": "hello"}
    async for http in _served(tmp_path, model):
        with pytest.raises(openai.InternalServerError) as failed:
            await _sdk(http).chat.completions.create(model="aptix-general", messages=[ask])
        streamed = await http.post(
            "/chat/completions",
            json={"model": "aptix-general", "messages": [ask], "stream": True},
        )
        executed = await http.post("/agent/execute", json={"instruction": "hello"})
        assert failed.value.status_code == 502
        assert failed.value.code == "model_error"
        assert "The model endpoint answered HTTP 500: " in failed.value.message
        assert "model_error" in streamed.text
        assert executed.json()["kind"] == "error"
        port = server.base_url.split(":")[-1].split("/")[0]
        for answer in (failed.value.message, streamed.text, executed.text):
            assert port not in answer
            assert "127.0.0.1" not in answer
        # The operator still finds where the endpoint is.
        assert len(llm_log.lines) == 3
        assert all(server.base_url in line for line in llm_log.lines)
