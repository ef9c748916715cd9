"""What a tool returns reaches every surface as valid JSON of its advertised shape, or fails.

Oversized results, non-finite floats, lone surrogates and a value that breaks the return
annotation (the MCP ``outputSchema``) are each handled one way, over HTTP, MCP and in turns.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from mcp.client.client import Client
from pydantic import BaseModel

import aptix
from aptix import AgentTool, AgentToolExecutor, AgentToolRegistry, InvokeResult
from aptix.api import create_app
from aptix.mcp import build_mcp_server
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolCall, AgentToolExecutionContext, function_schema
from aptix.tools.args import ToolArgs
from aptix.tools.bulkhead import BulkheadFullError


class Weather(BaseModel):
    """A forecast."""

    city: str
    temp: float


@aptix.tool(usage="Returns what it is asked for.")
def returns(kind: str) -> Any:
    """Returns a value of the asked kind.

    Args:
        kind: big, inf, nan, inf_list or surrogate.
    """
    values: dict[str, Any] = {
        "big": "x" * 2_000,
        "inf": {"v": float("inf")},
        "nan": float("nan"),
        "inf_list": [1.5, float("-inf")],
        "surrogate": "a\ud800b",
    }
    return values[kind]


@aptix.tool(usage="Forecasts the weather.")
async def forecast(how: str) -> Weather:
    """Forecasts the weather, or returns something else.

    Args:
        how: ok, inf (an infinite temperature) or wrong (a dict that is not a Weather).
    """
    temps = {"ok": 4.5, "inf": float("inf")}
    if how == "wrong":
        return {"nope": 1}  # type: ignore[return-value]
    return {"city": "Oslo", "temp": temps[how]}  # type: ignore[return-value]


class Readings(BaseModel):
    """Values whose annotations allow null where a float is not finite."""

    loose: dict[str, Any]
    optional: float | None
    numbers: list[float]


@aptix.tool(usage="Reads the gauges.")
async def readings() -> Readings:
    """Reads the gauges, one of them broken."""
    return Readings(loose={"v": float("nan")}, optional=float("inf"), numbers=[1.0])


@aptix.tool(usage="Blocks the event loop.")
async def blocker() -> str:
    """Sleeps without awaiting, holding the event loop."""
    time.sleep(0.6)  # noqa: ASYNC251 - the point of the tool
    return "done"


class _NoArgs(ToolArgs):
    pass


class InfText(AgentTool):
    """A class tool answering with Python's json.dumps of an infinite float."""

    TOOL_NAME: ClassVar[str] = "inf_text"
    TOOL_USAGE_METADATA: ClassVar[str] = "Answers with Infinity."

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Answers with Infinity.", _NoArgs)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create(json.dumps({"v": float("inf"), "w": [float("nan")]}))


@pytest.fixture
def executor(logger: RecordingLogger) -> AgentToolExecutor:
    registry = AgentToolRegistry(logger)
    for tool in (returns, forecast, readings, InfText):
        registry.register(tool)
    return AgentToolExecutor(registry, logger, max_result_bytes=1_000)


async def _run(executor: AgentToolExecutor, name: str, arguments: dict[str, Any]) -> AgentToolCall:
    context = AgentToolExecutionContext(session_id="", conversation_id="c", org="o", user="u")
    return await executor.execute(AgentToolCall("c1", name, json.dumps(arguments)), context)


async def test_a_result_over_the_limit_is_a_failed_call_saying_its_size(
    executor: AgentToolExecutor,
) -> None:
    done = await _run(executor, "returns", {"kind": "big"})
    assert (done.outcome, done.result_json) == ("failed", None)
    assert done.error_message == (
        "The tool 'returns' returned 2002 bytes, over the limit of 1000 bytes "
        "(APTIX_TOOL_MAX_RESULT_BYTES); nothing of it was kept."
    )


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("inf", {"v": None}), ("nan", None), ("inf_list", [1.5, None])],
)
async def test_non_finite_floats_are_null_and_an_object_stays_an_object(
    executor: AgentToolExecutor, kind: str, expected: Any
) -> None:
    done = await _run(executor, "returns", {"kind": kind})
    assert done.outcome == "succeeded", done.error_message
    assert json.loads(done.result_json or "") == expected


async def test_a_class_tool_s_infinity_is_null_too(executor: AgentToolExecutor) -> None:
    done = await _run(executor, "inf_text", {})
    assert done.result_json == '{"v":null,"w":[null]}'


async def test_an_infinity_where_the_annotation_promises_a_number_fails_the_call(
    executor: AgentToolExecutor, logger: RecordingLogger
) -> None:
    # null would break the advertised outputSchema ("temp": number) that MCP clients check.
    done = await _run(executor, "forecast", {"how": "inf"})
    assert (done.outcome, done.result_json) == ("failed", None)
    assert done.error_message == (
        "The tool 'forecast' failed unexpectedly. The error has been logged."
    )
    [record] = logger.of_kind("exception")
    assert record.tag == "[forecast_ExecuteAsync__Exception]"
    assert "inf at temp" in str(record.exception)


async def test_an_infinity_where_the_annotation_allows_null_is_null(
    executor: AgentToolExecutor,
) -> None:
    done = await _run(executor, "readings", {})
    assert done.outcome == "succeeded", done.error_message
    assert json.loads(done.result_json or "") == {
        "loose": {"v": None},
        "optional": None,
        "numbers": [1.0],
    }


async def test_a_lone_surrogate_in_a_function_tool_s_result_becomes_a_replacement(
    executor: AgentToolExecutor, logger: RecordingLogger
) -> None:
    done = await _run(executor, "returns", {"kind": "surrogate"})
    assert done.outcome == "succeeded", done.error_message
    assert json.loads(done.result_json or "") == "a\ufffdb"
    assert logger.of_kind("exception") == []


async def test_a_value_breaking_the_return_annotation_is_a_failed_call_logged_with_its_tag(
    executor: AgentToolExecutor, logger: RecordingLogger
) -> None:
    done = await _run(executor, "forecast", {"how": "wrong"})
    assert done.outcome == "failed"
    assert done.error_message == (
        "The tool 'forecast' failed unexpectedly. The error has been logged."
    )
    [record] = logger.of_kind("exception")
    assert record.tag == "[forecast_ExecuteAsync__Exception]"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        tool_timeout_seconds=0.3,
        tool_max_result_bytes=1_000,
    )
    async with open_runtime(settings) as runtime:
        for tool in (returns, forecast, blocker):
            runtime.registry.register(tool)
        yield runtime


@pytest.fixture
async def client(served: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime=served))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


async def test_over_http_the_limit_is_the_setting_and_an_infinity_stays_an_object(
    client: httpx.AsyncClient,
) -> None:
    big = await client.post("/v1/tools/returns/invoke", json={"arguments": {"kind": "big"}})
    assert big.status_code == 200
    assert big.json()["successful"] is False
    assert "over the limit of 1000 bytes" in big.json()["errors"][0]["message"]
    inf = await client.post("/v1/tools/returns/invoke", json={"arguments": {"kind": "inf"}})
    assert inf.json()["result"] == {"v": None}


async def test_a_tool_blocking_the_event_loop_past_its_limit_answers_504_timeout(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.post("/v1/tools/blocker/invoke", json={"arguments": {}})
    assert answer.status_code == 504, answer.text
    assert answer.json()["error"]["code"] == "timeout"


async def test_over_mcp_a_broken_output_is_an_error_not_invalid_structured_content(
    served: Runtime,
) -> None:
    async with Client(build_mcp_server(served)) as mcp:
        wrong = await mcp.call_tool("forecast", {"how": "wrong"})
        right = await mcp.call_tool("forecast", {"how": "ok"})
    assert wrong.is_error
    assert "failed unexpectedly" in wrong.content[0].text  # type: ignore[union-attr]
    assert not right.is_error
    assert right.structured_content == {"city": "Oslo", "temp": 4.5}


def test_the_overloaded_answer_promises_no_time() -> None:
    message = str(BulkheadFullError(2))
    assert message.startswith("2 sync tool calls of this organization are still running")
    assert "about" not in message
    assert message.endswith("retry later.")
