"""A tool raising ``SystemExit``, any ``BaseException`` or its own ``CancelledError`` fails.

HTTP invoke, MCP, the CLI and a model turn all answer with a failed call in their envelope,
and the session is free at once.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from typer.testing import CliRunner

import aptix
from aptix.api import create_app
from aptix.mcp import build_mcp_server
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, call, reply


@aptix.tool(usage="Exits like argparse on bad input.")
def exits() -> str:
    """Calls sys.exit, as argparse and click do."""
    sys.exit(2)


@aptix.tool(usage="Raises its own CancelledError.")
async def cancels_itself() -> str:
    """Raises CancelledError without anyone cancelling it."""
    await asyncio.sleep(0)
    raise asyncio.CancelledError


class LibraryTimeout(BaseException):
    """A library's own ``BaseException`` (gevent's and trio's time-outs are ones)."""


@aptix.tool(usage="Raises a library's BaseException.")
async def raises_base() -> str:
    """Raises a BaseException that is neither SystemExit nor KeyboardInterrupt."""
    await asyncio.sleep(0)
    raise LibraryTimeout("base!")


@aptix.tool(usage="Raises a BaseException in its thread.")
def raises_base_in_thread() -> str:
    """Raises a plain BaseException from a worker thread."""
    raise BaseException("base!")


TOOLS = [exits, cancels_itself, raises_base, raises_base_in_thread]
NAMES = [t.TOOL_NAME for t in TOOLS]


@pytest.fixture
async def tooled(runtime: Runtime) -> Runtime:
    for tool in TOOLS:
        runtime.registry.register(tool)
    return runtime


@pytest.fixture
async def client(tooled: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime=tooled))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


@pytest.mark.parametrize("name", NAMES)
async def test_http_invoke_answers_a_failed_call(client: httpx.AsyncClient, name: str) -> None:
    answer = await client.post(f"/v1/tools/{name}/invoke", json={"arguments": {}})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["successful"] is False
    assert body["errors"] == [
        {"message": f"The tool '{name}' failed unexpectedly. The error has been logged."}
    ]


@pytest.mark.parametrize("name", NAMES)
async def test_mcp_answers_an_error_result(tooled: Runtime, name: str) -> None:
    async with Client(build_mcp_server(tooled)) as mcp:
        result = await mcp.call_tool(name, {})
    assert result.is_error
    assert "failed unexpectedly" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("name", NAMES)
async def test_a_model_turn_gets_a_failed_call_and_the_session_is_free(
    tooled: Runtime, name: str
) -> None:
    model = ScriptedModel()
    model.add(reply(None, call(name, {}, id="x1")), reply("It failed."), reply("Next."))
    reasoner = tooled.reasoner(model)
    reasoner._offered = lambda _w, tools, _o: [*tools, name]
    tooled.executor._guard = None  # offered here, not by the mode
    session = (await tooled.services.sessions.create_session(org="acme", user="ann")).result
    assert session is not None
    done = await reasoner.execute(session_id=session.id, org="acme", user="ann", instruction="go")
    assert done.text == "It failed."
    [failed] = done.tool_calls
    assert (failed["outcome"], failed["wasExecuted"]) == ("failed", False)
    told = json.loads(model.requests[1].messages[-1]["content"])
    assert "failed unexpectedly" in told["error"]
    nxt = await reasoner.execute(session_id=session.id, org="acme", user="ann", instruction="on")
    assert nxt.text == "Next."


def test_the_cli_answers_a_failed_call(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from aptix import runtime as runtime_module
    from aptix.cli.main import app

    real = runtime_module.build_registry

    def with_exits(*args: Any, **kwargs: Any) -> Any:
        registry = real(*args, **kwargs)
        registry.register(exits)
        return registry

    monkeypatch.setattr(runtime_module, "build_registry", with_exits)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["tools", "call", "exits", "{}", "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["errors"] == [
        {"message": "The tool 'exits' failed unexpectedly. The error has been logged."}
    ]
