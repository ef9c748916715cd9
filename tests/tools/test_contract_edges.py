"""Tool contract edges (issue 15 item 7): constructors, nullable types, names, plugins, time."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, ClassVar

import pytest

from aptix import AgentToolExecutor, AgentToolRegistry, InvokeResult, PluginLoadError
from aptix.errors import ToolContractError
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolCall, AgentToolExecutionContext
from aptix.tools.executor import BUILD_FAILURE
from aptix.tools.plugins import ENTRY_POINT_GROUP, register_plugins
from tests.tools.test_registry import _assert_refused, _Base, _make, _schema


class BrokenConstructorTool(_Base):
    TOOL_NAME = "broken_constructor"

    def __init__(self, logger: Any) -> None:
        raise RuntimeError("the widget service is down")


def _call(name: str) -> AgentToolCall:
    return AgentToolCall(call_id="c1", name=name, arguments_json="{}")


def test_build_all_names_the_tool_whose_constructor_fails() -> None:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(_Base)
    registry.register(BrokenConstructorTool)
    with pytest.raises(ToolContractError) as raised:
        registry.build_all()
    assert str(raised.value) == (
        "Tool 'broken_constructor' could not be built: RuntimeError: the widget service is down"
    )
    assert [e.message for e in logger.errors] == [str(raised.value)]


async def test_a_constructor_failing_at_call_time_is_a_failed_call(
    context: AgentToolExecutionContext,
) -> None:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(BrokenConstructorTool)
    done = await AgentToolExecutor(registry, logger).execute(_call("broken_constructor"), context)
    assert done.was_executed is False
    assert done.error_message == BUILD_FAILURE.format(name="broken_constructor")
    assert "widget service" in str(logger.errors[0].exception)


def _schema_with(prop: dict[str, Any]) -> dict[str, Any]:
    schema = _schema("typed_tool")
    schema["parameters"]["properties"]["x"] = {**prop, "description": "An x."}
    return schema


def test_a_nullable_type_list_is_accepted() -> None:
    tool = _make(
        TOOL_NAME="typed_tool",
        schema=classmethod(lambda cls: _schema_with({"type": ["string", "null"]})),
    )
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(tool)
    assert registry.has_tool("typed_tool")


@pytest.mark.parametrize(
    "kind",
    [[["string"]], ["null"], [], ["string", "date"], {"oneOf": "string"}, [{"x": 1}]],
)
def test_a_malformed_type_is_refused_naming_the_property(kind: Any) -> None:
    tool = _make(
        TOOL_NAME="typed_tool", schema=classmethod(lambda cls: _schema_with({"type": kind}))
    )
    _assert_refused(tool, "property 'x' must declare a simple JSON type")


def test_a_contract_check_that_breaks_is_a_logged_contract_error() -> None:
    class Weird(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            raise TypeError("unhashable type: 'list'")

    tool = _make(TOOL_NAME="typed_tool", schema=classmethod(lambda cls: Weird(type="function")))
    _assert_refused(tool, "could not be checked against the tool contract: TypeError")


@pytest.mark.parametrize("name", ["name\n", "name\r\n", "\nname"])
def test_a_tool_name_with_a_newline_is_refused(name: str) -> None:
    _assert_refused(_make(TOOL_NAME=name), "must match")


PLUGIN = """
from typing import Any
from aptix import AgentTool, InvokeResult, function_schema
from aptix.tools.args import ToolArgs

class _Args(ToolArgs):
    pass

class EchoTool(AgentTool):
    TOOL_NAME = "acme_echo"
    TOOL_USAGE_METADATA = "Call to echo."

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Echoes.", _Args)

    async def execute(self, arguments_json: str, context: Any) -> InvokeResult[str]:
        return InvokeResult.create('"' + self.prefix + '"')

def make_echo() -> EchoTool:
    return EchoTool("built by the factory")

def broken_factory() -> EchoTool:
    raise OSError("no config file")

def not_a_tool() -> str:
    return "hello"
"""


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "acme_factory_tools.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "acme_factory_tools"


def test_a_plugin_factory_function_is_supported(
    plugin_module: str, context: AgentToolExecutionContext
) -> None:
    registry = AgentToolRegistry(RecordingLogger())
    ep = EntryPoint("echo", f"{plugin_module}:make_echo", ENTRY_POINT_GROUP)
    assert register_plugins(registry, [ep]) == ["acme_echo"]
    tool = registry.get_tool("acme_echo")
    assert getattr(tool, "prefix", None) == "built by the factory"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("broken_factory", "its factory raised OSError: no config file"),
        ("not_a_tool", "its factory returned str, not an AgentTool instance"),
    ],
)
def test_a_failing_plugin_factory_names_the_plugin(
    plugin_module: str, target: str, message: str
) -> None:
    registry = AgentToolRegistry(RecordingLogger())
    ep = EntryPoint("echo", f"{plugin_module}:{target}", ENTRY_POINT_GROUP)
    with pytest.raises(PluginLoadError) as raised:
        register_plugins(registry, [ep])
    assert str(raised.value).startswith("Plugin 'echo' (acme_factory_tools:")
    assert message in str(raised.value)
    assert registry.registered_tools == ()


class SyncTool(_Base):
    """Blocking work in a plain ``def execute``: Aptix runs it in a worker thread."""

    TOOL_NAME = "sync_tool"
    started: ClassVar[threading.Event]
    release: ClassVar[threading.Event]
    thread: ClassVar[int | None] = None

    def execute(  # type: ignore[override]
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        SyncTool.thread = threading.get_ident()
        SyncTool.started.set()
        released = SyncTool.release.wait(10)
        return InvokeResult.create(json.dumps({"released": released}))


@pytest.fixture
def sync_events() -> Any:
    SyncTool.started, SyncTool.release = threading.Event(), threading.Event()
    yield
    SyncTool.release.set()


@pytest.mark.usefixtures("sync_events")
async def test_a_sync_tool_runs_in_a_thread_without_blocking_the_loop(
    context: AgentToolExecutionContext,
) -> None:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(SyncTool)
    running = asyncio.create_task(
        AgentToolExecutor(registry, logger).execute(_call("sync_tool"), context)
    )
    # Only a free event loop gets here while the tool waits for the release.
    assert await asyncio.to_thread(SyncTool.started.wait, 10)
    SyncTool.release.set()
    done = await running
    assert done.result_json == '{"released": true}'
    assert SyncTool.thread != threading.get_ident()


@pytest.mark.usefixtures("sync_events")
async def test_a_sync_tool_past_its_limit_is_a_timeout(
    context: AgentToolExecutionContext,
) -> None:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(SyncTool)
    done = await AgentToolExecutor(registry, logger, timeout_seconds=0.1).execute(
        _call("sync_tool"), context
    )
    # Its thread cannot be stopped: the model is told it may still complete.
    assert done.outcome == "abandoned"
    assert done.error_message == (
        "The tool 'sync_tool' did not finish within 0.1 seconds and could not be stopped: it "
        "may still complete. Check whether it took effect before retrying."
    )
    assert not SyncTool.release.is_set()  # the report did not wait for the thread


class StubbornTool(_Base):
    """Swallows cancellation and then claims success."""

    TOOL_NAME = "stubborn"
    finished: ClassVar[asyncio.Event]

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await StubbornTool.finished.wait()
        return InvokeResult.create('{"ok": true}')


async def test_a_tool_swallowing_cancellation_is_a_timeout_at_its_limit(
    context: AgentToolExecutionContext,
) -> None:
    StubbornTool.finished = asyncio.Event()
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(StubbornTool)
    executor = AgentToolExecutor(registry, logger, timeout_seconds=0.1)
    done = await executor.execute(_call("stubborn"), context)
    assert (done.was_executed, done.outcome) == (False, "abandoned")
    assert "may still complete" in (done.error_message or "")
    assert logger.errors[0].tag == "[stubborn_ExecuteAsync__Timeout]"
    StubbornTool.finished.set()  # the abandoned tool may end now
    await asyncio.sleep(0)


class BlockingTool(_Base):
    """An async tool that blocks the event loop with a synchronous sleep."""

    TOOL_NAME = "blocking"

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        # Blocks before its first await, so no timer can fire first however loaded the
        # machine is: only the executor's clock can tell that the limit was passed.
        time.sleep(0.3)  # noqa: ASYNC251 - the misbehaviour under test
        return InvokeResult.create('{"ok": true}')


async def test_a_tool_blocking_the_loop_past_its_limit_is_a_timeout_not_a_success(
    context: AgentToolExecutionContext,
) -> None:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(BlockingTool)
    executor = AgentToolExecutor(registry, logger, timeout_seconds=0.05)
    done = await executor.execute(_call("blocking"), context)
    # It did finish: the model is told so, and that its result was not kept.
    assert (done.was_executed, done.outcome) == (False, "timed_out")
    assert done.error_message == (
        "The tool 'blocking' blocked the server past its limit of 0.05 seconds; it finished, "
        "but its result was discarded."
    )
    assert "blocked the event loop" in logger.errors[0].message
