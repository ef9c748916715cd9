"""A streamed turn whose client hangs up before the model's last chunk is still charged.

The model reports its usage with its last chunk. A client that read the answer and closed the
stream just before it cancelled the turn inside the model call, and the call was never
counted: not in ``/v1/usage``, not against the org's token budget, however many were made.
The call ran (the provider bills it), so it is charged an estimate: its prompt, as the
context counts it, plus the text it had streamed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse, TextSink
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from tests.api.hang_up import http_scope, stream_then_hang_up

KEY = "k-ann"
BODIES = {
    "/v1/chat/completions": {
        "model": "aptix-general",
        "stream": True,
        "messages": [{"role": "user", "content": "a long answer, please"}],
    },
    "/v1/agent/execute": {"instruction": "a long answer, please", "stream": True},
}


class StreamsThenStalls:
    """Streams eight words, then keeps the rest (and its usage) until the client has gone."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        self.calls += 1
        assert on_text is not None
        for i in range(8):
            await on_text(f"w{i} ")
        await asyncio.Event().wait()  # the last words and the usage chunk never come
        raise AssertionError("unreachable")


async def _stream_then_hang_up(app: Any, path: str) -> bytes:
    """POST ``path`` as uvicorn serves it; the client leaves once the eighth word arrived."""
    headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    return await stream_then_hang_up(app, http_scope(path, headers), BODIES[path], b"w7")


@pytest.mark.parametrize("path", list(BODIES))
async def test_a_stream_dropped_before_its_usage_is_charged_to_the_key_and_the_budget(
    tmp_path: Path, path: str
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        api_keys=f"{KEY}=acme:ann:admin",
        token_budget="1000000/hour",
    )
    model = StreamsThenStalls()
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=model)
        received = await _stream_then_hang_up(app, path)
        assert b"w7" in received
        assert model.calls == 1
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
            for _ in range(100):  # the charge is written while the turn winds down
                usage = await api.get("/v1/usage", headers={"Authorization": f"Bearer {KEY}"})
                if usage.json()["modelCalls"]:
                    break
                await asyncio.sleep(0.02)
    shown = usage.json()
    assert shown["modelCalls"] == 1
    # The prompt (system message, tool schemas, the instruction) counts, and the eight words
    # streamed ("w0 " ... "w7 ": 24 bytes, one token per 3 bytes at most) too.
    assert shown["promptTokens"] > 100
    assert 1 <= shown["completionTokens"] <= 8
    budget = shown["limits"]["tokenBudget"]
    assert budget["remaining"] == 1_000_000 - shown["totalTokens"]
