"""The built-in demo model: labelled, streaming, and calling the built-in tools when asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aptix.errors import LlmError
from aptix.llm.demo import LABEL, DemoModel, is_demo
from aptix.llm.types import LlmRequest, answers_in_formats
from aptix.reasoner import TurnEvent
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings


@pytest.fixture
async def runtime(tmp_path: Path):  # type: ignore[no-untyped-def]
    settings = AptixSettings(data_dir=tmp_path, semantic_matching=False, llm_model="demo")
    async with open_runtime(settings) as opened:
        yield opened


async def _turn(runtime: Runtime, session_id: str, instruction: str) -> tuple[str, list[str]]:
    reasoner = runtime.reasoner()
    prepared = await reasoner.prepare(
        session_id=session_id, org="local", user="local", instruction=instruction
    )
    deltas: list[str] = []

    async def on_event(event: TurnEvent) -> None:
        if event.type == "text_delta":
            deltas.append(str(event.data["delta"]))

    result = await reasoner.run(prepared, on_event)
    assert result.kind == "ok", result
    calls = [c["name"] for c in result.tool_calls]
    assert "".join(deltas) == result.text  # streamed word by word, then whole
    assert (result.text or "").startswith(LABEL)
    return result.text or "", calls


async def test_the_demo_model_answers_and_calls_each_built_in_tool(runtime: Runtime) -> None:
    created = await runtime.services.sessions.create_session(org="local", user="local")
    assert created.result is not None
    sid = created.result.id
    assert isinstance(runtime.default_model(), DemoModel)

    text, calls = await _turn(runtime, sid, "hello")
    assert calls == []
    assert "demo model" in text
    assert await _turn(runtime, sid, "calculate 2*(3+4) please") == (
        f"{LABEL} The calculator says 14.",
        ["agent_calculator"],
    )
    text, calls = await _turn(runtime, sid, "which modes are there?")
    assert calls == ["agent_list_modes"]
    assert "general, workflow_authoring, calculation" in text
    text, calls = await _turn(runtime, sid, "show me the workflows")
    assert calls == ["agent_workflow_registry"]
    assert "greet_user" in text
    text, calls = await _turn(runtime, sid, "switch to calculation mode")
    assert calls == ["agent_change_mode"]
    assert text.endswith("now in calculation mode.")
    session = await runtime.services.sessions.get_session(sid, "local")
    assert session is not None
    assert session.mode == "calculation"
    text, calls = await _turn(runtime, sid, "ask me for approval")
    assert calls == []  # request_user_approval is not offered in calculation mode
    assert "not offered in this mode" in text


async def test_the_demo_model_asks_for_approval_and_reads_the_answer(runtime: Runtime) -> None:
    from aptix.reasoner import ToolResultInput

    created = await runtime.services.sessions.create_session(org="local", user="local")
    assert created.result is not None
    reasoner = runtime.reasoner()
    prepared = await reasoner.prepare(
        session_id=created.result.id, org="local", user="local", instruction="ask for approval"
    )
    pending = await reasoner.run(prepared)
    assert pending.kind == "tool-only"
    (approval,) = pending.tool_calls
    assert approval["name"] == "request_user_approval"
    answer = ToolResultInput(approval["callId"], json.dumps({"approved": True}))
    resumed = await reasoner.prepare(
        session_id=created.result.id, org="local", user="local", tool_results=[answer]
    )
    done = await reasoner.run(resumed)
    assert done.text == f"{LABEL} You approved."


def test_demo_is_chosen_only_without_an_endpoint() -> None:
    assert is_demo("demo", None)
    assert is_demo(" Demo ", None)
    assert not is_demo("demo", "http://localhost:11434/v1")  # a real model named "demo"
    assert not is_demo("gpt-4o-mini", None)
    assert not is_demo(None, None)


async def test_the_http_api_answers_with_the_demo_model(runtime: Runtime) -> None:
    import httpx

    from aptix.api import create_app

    app = create_app(runtime=runtime)  # no model given: the settings' (demo) one
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answer = await client.post(
            "/v1/agent/execute", json={"instruction": "calculate 6*7"}, timeout=30
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == f"{LABEL} The calculator says 42."


async def test_the_demo_model_answers_no_response_format_but_free_text() -> None:
    model = DemoModel(word_delay_seconds=0)
    ask = ({"role": "user", "content": "hello"},)
    assert not answers_in_formats(model)  # the surfaces refuse such a request up front
    with pytest.raises(LlmError, match="free text only"):
        await model.complete(LlmRequest(ask, response_format={"type": "json_object"}))
    answer = await model.complete(LlmRequest(ask, response_format={"type": "text"}))
    assert (answer.text or "").startswith(LABEL)
