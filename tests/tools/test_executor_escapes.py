"""The executor never lets go: exceptions that are not ``Exception`` become failed calls."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any, ClassVar

import pytest

import aptix
from aptix import AgentTool, AgentToolExecutor, AgentToolRegistry, InvokeResult
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolCall, AgentToolExecutionContext, function_schema
from aptix.tools.args import ToolArgs


class _NoArgs(ToolArgs):
    pass


class _TestTool(AgentTool):
    """A tool without arguments; subclasses say what running it does."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "A test tool.", _NoArgs)


class _Raising(_TestTool):
    TOOL_USAGE_METADATA: ClassVar[str] = "Raises what it is told to."
    error: ClassVar[type[BaseException]]
    suspend_first: ClassVar[bool] = False

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        if self.suspend_first:
            await asyncio.sleep(0)
        raise self.error()


def _tool(name: str, error: type[BaseException], suspend: bool) -> type[AgentTool]:
    return type(name, (_Raising,), {"TOOL_NAME": name, "error": error, "suspend_first": suspend})


def exits_in_a_thread() -> str:
    """Exits like argparse does, from a plain function."""
    sys.exit(2)


@aptix.tool(usage="Blocks until released.")
def blocking() -> str:
    """Blocks its worker thread until the test releases it."""
    RELEASE.wait(10)
    return "late"


RELEASE = threading.Event()


class LibraryError(BaseException):
    """A library's own ``BaseException`` subclass."""


CASES = [
    (BaseException, False),
    (BaseException, True),
    (LibraryError, False),
    (LibraryError, True),
    (SystemExit, False),
    (SystemExit, True),
    (KeyboardInterrupt, False),
    (KeyboardInterrupt, True),
    (asyncio.CancelledError, False),
    (asyncio.CancelledError, True),
]


@pytest.fixture
def executor(logger: RecordingLogger) -> AgentToolExecutor:
    registry = AgentToolRegistry(logger)
    for error, suspend in CASES:
        registry.register(_tool(f"raise_{error.__name__}_{int(suspend)}", error, suspend))
    registry.register(
        aptix.tool(usage="Exits.", name="exits")(exits_in_a_thread)  # a sync function
    )
    registry.register(blocking)
    return AgentToolExecutor(registry, logger, timeout_seconds=5.0, timeouts={"blocking": 0.2})


@pytest.mark.parametrize(("error", "suspend"), CASES)
async def test_a_tool_raising_a_base_exception_is_a_failed_call_logged_with_its_tag(
    executor: AgentToolExecutor,
    context: AgentToolExecutionContext,
    logger: RecordingLogger,
    error: type[BaseException],
    suspend: bool,
) -> None:
    name = f"raise_{error.__name__}_{int(suspend)}"
    done = await executor.execute(AgentToolCall("c1", name, "{}"), context)
    assert (done.was_executed, done.outcome) == (False, "failed")
    assert (
        done.error_message == f"The tool '{name}' failed unexpectedly. The error has been logged."
    )
    [record] = logger.of_kind("exception")
    assert record.tag == f"[{name}_ExecuteAsync__Exception]"


async def test_sys_exit_in_a_sync_function_tool_is_a_failed_call(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    done = await executor.invoke("exits", "{}", context)
    assert not done.successful
    assert "failed unexpectedly" in (done.error_message or "")


async def test_a_batch_with_a_tool_raising_system_exit_finishes_the_others(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    calls = [AgentToolCall("a", "raise_SystemExit_1", "{}"), AgentToolCall("b", "exits", "{}")]
    done = await executor.execute_many(calls, context)
    assert [c.outcome for c in done] == ["failed", "failed"]


async def test_a_real_cancellation_still_propagates_through_a_suspended_tool(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    task = asyncio.create_task(executor.execute(AgentToolCall("c", "blocking", "{}"), context))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    RELEASE.set()
    RELEASE.clear()


async def test_a_sync_tool_left_running_at_its_limit_is_abandoned_and_says_it_may_complete(
    executor: AgentToolExecutor, context: AgentToolExecutionContext
) -> None:
    try:
        done = await executor.execute(AgentToolCall("c", "blocking", "{}"), context)
    finally:
        RELEASE.set()
    RELEASE.clear()
    assert done.outcome == "abandoned"
    assert "may still complete" in (done.error_message or "")


async def test_an_async_tool_stopped_at_its_limit_is_timed_out(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    @aptix.tool(usage="Sleeps.")
    async def sleeper() -> str:
        """Sleeps for a minute."""
        await asyncio.sleep(60)
        return "late"

    registry = AgentToolRegistry(logger)
    registry.register(sleeper)
    executor = AgentToolExecutor(registry, logger, timeout_seconds=0.1)
    done = await executor.execute(AgentToolCall("c", "sleeper", "{}"), context)
    assert done.outcome == "timed_out"
    assert done.error_message == "The tool 'sleeper' timed out after 0.1 seconds."


class _Odd(_TestTool):
    TOOL_NAME = "odd"
    TOOL_USAGE_METADATA: ClassVar[str] = "Answers with a lone surrogate."

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create('{"text": "a\ud800b"}')


async def test_a_tool_result_with_a_lone_surrogate_is_stored_with_a_replacement(
    logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    registry = AgentToolRegistry(logger)
    registry.register(_Odd)
    executor = AgentToolExecutor(registry, logger)
    done = await executor.execute(AgentToolCall("c", "odd", "{}"), context)
    assert done.outcome == "succeeded"
    assert done.result_json == '{"text": "a\ufffdb"}'
