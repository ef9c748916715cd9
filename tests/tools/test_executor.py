from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar

import pytest

from aptix import AgentTool, AgentToolExecutor, AgentToolRegistry, InvokeResult
from aptix.db.engine import Database, create_engine
from aptix.reasoner.tool_batch import tool_message
from aptix.results import ErrorMessage
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolCall, AgentToolExecutionContext, function_schema
from aptix.tools.args import ToolArgs
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.builtin.user_approval import UserApprovalTool
from aptix.tools.executor import GENERIC_FAILURE


class _NoArgs(ToolArgs):
    pass


class _TestTool(AgentTool):
    TOOL_USAGE_METADATA: ClassVar[str] = "Used by executor tests."

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "A test tool.", _NoArgs)


class ExplodingTool(_TestTool):
    TOOL_NAME = "exploding"

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        raise RuntimeError("secret connection string leaked")


class FailingTool(_TestTool):
    TOOL_NAME = "failing"

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.from_error("The widget is missing.")


class SlowTool(_TestTool):
    TOOL_NAME = "slow"
    started: ClassVar[list[float]] = []

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        SlowTool.started.append(time.perf_counter())
        await asyncio.sleep(float(json.loads(arguments_json or "{}").get("seconds", 0.2)))
        return InvokeResult.create('{"slept": true}')


class WrongReturnTool(_TestTool):
    TOOL_NAME = "wrong_return"

    async def execute(  # type: ignore[override]
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> dict[str, Any]:
        return {"not": "an InvokeResult"}


class OddResultTool(_TestTool):
    TOOL_NAME = "odd_result"

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        value = json.loads(arguments_json)["value"]
        return InvokeResult(result=value)


@pytest.mark.parametrize(
    ("value", "result_json"),
    [
        (None, "null"),
        ("plain text, not JSON", '"plain text, not JSON"'),
        ("NaN", '"NaN"'),
        ("{broken", '"{broken"'),
        ("", '""'),
        ('{"ok": true}', '{"ok": true}'),
        ("42", "42"),
    ],
)
async def test_a_successful_result_is_always_json_text(
    logger: RecordingLogger,
    context: AgentToolExecutionContext,
    value: str | None,
    result_json: str,
) -> None:
    registry = AgentToolRegistry(logger)
    registry.register(OddResultTool)
    executor = AgentToolExecutor(registry, logger)
    arguments = json.dumps({"value": value})
    done = await executor.execute(_call("odd_result", arguments), context)
    assert (done.was_executed, done.result_json) == (True, result_json)
    assert tool_message(done)["content"] == result_json
    invoked = await executor.invoke("odd_result", arguments, context)
    assert (invoked.successful, invoked.result) == (True, result_json)


class SilentFailureTool(_TestTool):
    TOOL_NAME = "silent_failure"

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        messages = json.loads(arguments_json)["messages"]
        return InvokeResult(errors=tuple(ErrorMessage(m) for m in messages))


SILENT = "The tool 'silent_failure' failed without saying why. This has been logged."


@pytest.mark.parametrize(
    ("messages", "told"),
    [
        ([""], SILENT),
        ([" \n\u3000"], SILENT),
        (["", "The disk is full.", "  "], "The disk is full."),
        ([None], SILENT),  # not text: a breach of the contract like a blank one
    ],
)
async def test_a_failure_without_a_message_says_so_on_every_path(
    logger: RecordingLogger,
    context: AgentToolExecutionContext,
    messages: list[str | None],
    told: str,
) -> None:
    registry = AgentToolRegistry(logger)
    registry.register(SilentFailureTool)
    executor = AgentToolExecutor(registry, logger)
    arguments = json.dumps({"messages": messages})
    done = await executor.execute(_call("silent_failure", arguments), context)
    # The turn stores what the model is told, and neither says the tool did not run.
    assert (done.outcome, done.error_message) == ("failed", told)
    assert json.loads(tool_message(done)["content"]) == {"error": told}
    invoked = await executor.invoke("silent_failure", arguments, context)
    assert (invoked.successful, invoked.error_message) == (False, told)
    tags = {e.tag for e in logger.errors}
    assert tags == {"[silent_failure_ExecuteAsync__Contract]"}


@pytest.fixture
def executor(logger: RecordingLogger) -> AgentToolExecutor:
    registry = AgentToolRegistry(logger)
    for tool in (HelloWorldTool, UserApprovalTool, ExplodingTool, FailingTool, SlowTool):
        registry.register(tool)
    registry.register(WrongReturnTool)
    return AgentToolExecutor(registry, logger, timeout_seconds=5.0, timeouts={"slow": 0.5})


def _call(name: str, args: str = "{}", call_id: str = "c1") -> AgentToolCall:
    return AgentToolCall(call_id=call_id, name=name, arguments_json=args)


async def test_server_final_success_maps_onto_the_call(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    done = await executor.execute(_call("agent_hello_world", '{"name": "Ann"}'), context)
    assert done.is_server_tool is True
    assert done.was_executed is True
    assert done.requires_client_execution is False
    assert done.error_message is None
    assert done.call_id == "c1"
    assert json.loads(done.result_json or "")["message"] == "Hello, Ann! Welcome to Aptix."


async def test_client_final_success_requires_client_execution(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    done = await executor.execute(_call("request_user_approval", '{"prompt": "Go?"}'), context)
    assert done.is_server_tool is True
    assert done.was_executed is True
    assert done.requires_client_execution is True
    assert json.loads(done.result_json or "")["prompt"] == "Go?"


@pytest.mark.parametrize("name", ["", "no_such_tool"])
async def test_unknown_or_empty_tool_name_is_a_failed_call(
    executor: AgentToolExecutor, context: AgentToolExecutionContext, name: str
) -> None:
    done = await executor.execute(_call(name), context)
    assert done.was_executed is False
    assert done.is_server_tool is False
    assert done.result_json is None
    expected = "no tool name" if not name else "Unknown tool 'no_such_tool'"
    assert expected in (done.error_message or "")


async def test_tool_failure_is_not_executed_and_carries_the_message(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    done = await executor.execute(_call("failing"), context)
    assert done.is_server_tool is True
    assert done.was_executed is False
    assert done.error_message == "The widget is missing."


async def test_exception_is_logged_with_tag_and_becomes_generic_failure(
    executor: AgentToolExecutor, context: AgentToolExecutionContext, logger: RecordingLogger
) -> None:
    done = await executor.execute(_call("exploding"), context)
    assert done.was_executed is False
    assert done.error_message == (
        "The tool 'exploding' failed unexpectedly. The error has been logged."
    )
    assert "secret" not in (done.error_message or "")
    [record] = logger.of_kind("exception")
    assert record.tag == "[exploding_ExecuteAsync__Exception]"
    assert isinstance(record.exception, RuntimeError)
    assert record.pairs == {"SessionId": context.session_id, "ConversationId": "conv-1"}


async def test_wrong_return_type_becomes_generic_failure(
    executor: AgentToolExecutor, context: AgentToolExecutionContext, logger: RecordingLogger
) -> None:
    done = await executor.execute(_call("wrong_return"), context)
    assert done.was_executed is False
    assert "failed unexpectedly" in (done.error_message or "")
    assert logger.errors[0].tag == "[wrong_return_ExecuteAsync__Contract]"


async def test_timeout_is_a_failed_call_saying_so(
    executor: AgentToolExecutor, context: AgentToolExecutionContext, logger: RecordingLogger
) -> None:
    done = await executor.execute(_call("slow", '{"seconds": 5}'), context)
    assert done.was_executed is False
    assert done.error_message == "The tool 'slow' timed out after 0.5 seconds."
    assert logger.errors[0].tag == "[slow_ExecuteAsync__Timeout]"


async def test_batch_runs_concurrently_in_call_order_and_one_failure_disturbs_nothing(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    SlowTool.started.clear()
    calls = [
        _call("slow", '{"seconds": 0.2}', "a"),
        _call("exploding", "{}", "b"),
        _call("slow", '{"seconds": 0.2}', "c"),
        _call("agent_hello_world", '{"name": "Bo"}', "d"),
    ]
    done = await executor.execute_many(calls, context)
    assert [c.call_id for c in done] == ["a", "b", "c", "d"]
    assert [c.was_executed for c in done] == [True, False, True, True]
    # Both slow calls started before either finished: they ran concurrently.
    assert len(SlowTool.started) == 2
    assert SlowTool.started[1] - SlowTool.started[0] < 0.15


async def test_cancellation_propagates(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    task = asyncio.create_task(executor.execute(_call("slow", '{"seconds": 0.4}'), context))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_guard_refusal_is_a_failed_call(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    registry = AgentToolRegistry(logger)
    registry.register(HelloWorldTool)
    executor = AgentToolExecutor(
        registry, logger, guard=lambda tool, ctx: f"{tool.name} is not allowed here."
    )
    done = await executor.execute(_call("agent_hello_world", '{"name": "A"}'), context)
    assert done.was_executed is False
    assert done.error_message == "agent_hello_world is not allowed here."


async def test_invoke_returns_the_tool_result(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    ok = await executor.invoke("agent_hello_world", '{"name": "Cy"}', context)
    assert ok.successful
    assert json.loads(ok.result or "")["sessionId"] == context.session_id
    bad = await executor.invoke("nope", "{}", context)
    assert not bad.successful
    assert "Unknown tool 'nope'" in (bad.error_message or "")


def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on: connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class OutageTool(_TestTool):
    """Uses Aptix's own database, as a built-in tool does, while its server is down."""

    TOOL_NAME = "outage"

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        database = Database(create_engine(f"postgresql+asyncpg://u@127.0.0.1:{_closed_port()}/x"))
        try:
            await database.ping()
        finally:
            await database.close()
        return InvokeResult.create('"reached"')


async def test_a_database_outage_is_said_so_without_a_traceback(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    registry = AgentToolRegistry(logger)
    registry.register(OutageTool)
    executor = AgentToolExecutor(registry, logger)
    invoked = await executor.invoke("outage", "{}", context)
    assert invoked.error_message == "The database is unavailable right now; retry shortly."
    assert logger.of_kind("exception") == []  # the surface logs an outage once


class OwnSocketTool(_TestTool):
    """Connects to a service of its own, which is down."""

    TOOL_NAME = "own_socket"

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        await asyncio.open_connection("127.0.0.1", _closed_port())
        return InvokeResult.create('"reached"')


class OwnReadOnlySqliteTool(_TestTool):
    """Writes to a SQLite file of its own, which it may only read."""

    TOOL_NAME = "own_sqlite"
    path: ClassVar[Path]

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        with closing(sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)) as connection:
            connection.execute("INSERT INTO notes VALUES ('hi')")
        return InvokeResult.create('"written"')


@pytest.mark.parametrize("tool", [OwnSocketTool, OwnReadOnlySqliteTool])
async def test_a_tools_own_database_or_service_failing_is_the_tools_failure(
    tool: type[AgentTool],
    logger: RecordingLogger,
    context: AgentToolExecutionContext,
    tmp_path: Path,
) -> None:
    # The same errors as Aptix's own database raises (ConnectionRefusedError, SQLite's
    # SQLITE_READONLY) read "database unavailable" and "database refused", no traceback logged.
    OwnReadOnlySqliteTool.path = tmp_path / "notes.db"
    with closing(sqlite3.connect(OwnReadOnlySqliteTool.path)) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")
    registry = AgentToolRegistry(logger)
    registry.register(tool)
    executor = AgentToolExecutor(registry, logger)
    invoked = await executor.invoke(tool.TOOL_NAME, "{}", context)
    assert invoked.error_message == GENERIC_FAILURE.format(name=tool.TOOL_NAME)
    [logged] = logger.of_kind("exception")
    assert logged.tag == f"[{tool.TOOL_NAME}_ExecuteAsync__Exception]"
