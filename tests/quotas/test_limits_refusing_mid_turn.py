"""A model call the limits refuse mid-turn ends the turn under the limits' code, not the model's.

The model endpoint never failed: a turn stored ``model_error`` sent an operator to look at
the wrong dependency.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from aptix.api import create_app
from aptix.llm import LlmRequest, LlmResponse
from aptix.llm.types import Usage
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply
from tests.api.tcp_proxy import TcpProxy


async def _turn(settings: AptixSettings, answer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one turn on ``answer``; its execute answer and its turn as stored."""
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=FunctionModel(answer))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
            told = await api.post("/v1/agent/execute", json={"instruction": "add"})
            assert told.status_code == 200, told.text
            sid = told.json()["sessionId"]
            [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    return told.json(), turn


async def test_redis_lost_mid_turn_in_closed_mode_is_limits_unavailable(
    tmp_path: Path, redis_proxy: TcpProxy, prefix: str
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        token_budget="1000000/day",
        redis_url=f"redis://127.0.0.1:{redis_proxy.port}/0",
        redis_key_prefix=prefix,
        limits_when_redis_down="closed",
    )
    asked: list[LlmRequest] = []

    async def answer(request: LlmRequest) -> LlmResponse:
        asked.append(request)
        redis_proxy.stop()  # Redis goes while the call this answer asks for runs
        return reply(None, call("agent_calculator", {"expression": "1+1"}))

    told, turn = await _turn(settings, answer)
    assert len(asked) == 1  # the second model call was refused before the endpoint
    assert told["kind"] == "error"
    assert turn["status"] == "error"
    assert turn["error"]["code"] == "limits_unavailable"
    assert "Limits cannot be checked" in turn["error"]["message"]
    assert turn["toolCalls"][0]["outcome"] == "succeeded"


async def test_a_token_budget_spent_mid_turn_is_token_budget_exhausted(tmp_path: Path) -> None:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, token_budget="100/day"
    )

    async def answer(request: LlmRequest) -> LlmResponse:
        return reply(None, call("agent_calculator", {"expression": "1+1"}), usage=Usage(90, 20))

    told, turn = await _turn(settings, answer)
    assert told["kind"] == "error"
    assert turn["error"]["code"] == "token_budget_exhausted"
    assert turn["error"]["message"].startswith("Token budget reached")
    assert turn["toolCalls"][0]["outcome"] == "succeeded"
