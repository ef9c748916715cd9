"""``@aptix.tool``: schema from hints and docstring, execution, errors and every surface."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from enum import StrEnum
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Annotated, Literal

import httpx
import jsonschema
import pytest
from mcp.client.client import Client
from pydantic import BaseModel, Field

import aptix
from aptix.api import create_app
from aptix.errors import ToolContractError
from aptix.mcp import build_mcp_server
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import RecordingLogger, ScriptedModel, call, reply
from aptix.tools import AgentToolCall, AgentToolExecutionContext, AgentToolExecutor
from aptix.tools.registry import AgentToolRegistry
from tests.tools.modes import modes_offering
from tests.tools.sample_tools import weather_forecast


class Unit(StrEnum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Place(BaseModel):
    city: str = Field(min_length=1, description="The city.")
    country_code: str | None = Field(None, pattern="^[A-Z]{2}$")


class Reading(BaseModel):
    place: Place
    value: float


@aptix.tool(
    usage="Call this to read a sensor.",
    title="Sensor reading",
    annotations={"readOnlyHint": True},
)
async def read_sensor(
    place: Place,
    context: AgentToolExecutionContext,
    unit: Unit = Unit.CELSIUS,
    key: int | str = 3,
    level: Literal["low", "high"] = "low",
    tags: list[str] | None = None,
    label: Annotated[str, Field(max_length=8, description="A short label.")] = "x",
) -> Reading:
    """Reads one sensor.

    Args:
        place: Where the sensor is.
        unit: The unit of the value.
        key: The sensor key, a number or a name.
        level: The sampling level.
        tags: Free tags.
    """
    if place.city == "nowhere":
        raise aptix.ToolError("There is no sensor in 'nowhere'.")
    if place.city == "crash":
        raise RuntimeError("disk on fire")
    return Reading(place=place, value=len(context.session_id or ""))


def _executor(*tools: type[aptix.AgentTool]) -> tuple[AgentToolExecutor, RecordingLogger]:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    for t in tools:
        registry.register(t)
    return AgentToolExecutor(registry, logger), logger


def test_the_decorated_function_is_a_registrable_tool_class() -> None:
    assert issubclass(weather_forecast, aptix.AgentTool)
    assert weather_forecast.TOOL_NAME == "weather_forecast"
    assert weather_forecast.TOOL_USAGE_METADATA.startswith("Call this when")
    assert weather_forecast.is_fully_executed_on_server
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(weather_forecast)
    assert registry.registered_tools == ("weather_forecast",)


def test_the_ten_line_tool_shows_a_complete_schema() -> None:
    assert weather_forecast.schema() == {
        "type": "function",
        "name": "weather_forecast",
        "description": "Tomorrow's forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": 'The city name, e.g. "Lisbon".'},
                "days": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 7,
                    "default": 1,
                    "description": "How many days ahead, 1 to 7.",
                },
            },
            "required": ["city"],
        },
    }
    assert weather_forecast.TOOL_OUTPUT_SCHEMA == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "high_celsius": {"type": "number"}},
        "required": ["city", "high_celsius"],
    }


def test_nested_objects_enums_unions_constraints_and_defaults_are_kept() -> None:
    params = read_sensor.schema()["parameters"]
    props = params["properties"]
    assert "context" not in props  # injected, not exposed
    assert params["required"] == ["place"]
    place = props["place"]
    assert place["type"] == "object"
    assert place["description"] == "Where the sensor is."
    assert place["properties"]["city"] == {
        "type": "string",
        "minLength": 1,
        "description": "The city.",
    }
    assert place["properties"]["country_code"]["anyOf"][0]["pattern"] == "^[A-Z]{2}$"
    assert place["required"] == ["city"]
    assert props["unit"] == {
        "type": "string",
        "enum": ["celsius", "fahrenheit"],
        "default": "celsius",
        "description": "The unit of the value.",
    }
    assert props["key"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert props["key"]["default"] == 3
    assert props["level"]["enum"] == ["low", "high"]
    assert props["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Free tags.",
    }
    assert props["label"]["maxLength"] == 8
    assert props["label"]["description"] == "A short label."
    text = json.dumps(params)
    assert "$ref" not in text
    assert "$defs" not in text
    assert "title" not in text
    jsonschema.Draft202012Validator.check_schema(params)
    assert read_sensor.TOOL_ANNOTATIONS == {"readOnlyHint": True, "title": "Sensor reading"}


async def test_runs_through_the_executor_with_the_context_injected(
    context: AgentToolExecutionContext,
) -> None:
    executor, _ = _executor(read_sensor)
    done = await executor.execute(
        AgentToolCall("c1", "read_sensor", '{"place": {"city": "Oslo"}, "unit": "fahrenheit"}'),
        context,
    )
    assert done.was_executed
    assert json.loads(done.result_json or "") == {
        "place": {"city": "Oslo", "country_code": None},
        "value": 32,
    }


async def test_bad_arguments_are_a_failed_result_naming_the_field(
    context: AgentToolExecutionContext,
) -> None:
    executor, _ = _executor(read_sensor)
    done = await executor.execute(
        AgentToolCall("c1", "read_sensor", '{"place": {"city": ""}, "unit": "kelvin"}'), context
    )
    assert not done.was_executed
    assert done.error_message is not None
    assert "'place.city'" in done.error_message
    assert "'unit'" in done.error_message


async def test_tool_error_becomes_a_failed_result_with_its_message(
    context: AgentToolExecutionContext,
) -> None:
    executor, logger = _executor(read_sensor)
    done = await executor.execute(
        AgentToolCall("c1", "read_sensor", '{"place": {"city": "nowhere"}}'), context
    )
    assert done.error_message == "There is no sensor in 'nowhere'."
    assert logger.records == []


@aptix.tool(usage="Call this to fail without a reason.")
async def say_nothing(how: Literal["empty", "none"]) -> str:
    """Fails with a blank ToolError.

    Args:
        how: An empty message or none at all.
    """
    raise aptix.ToolError("") if how == "empty" else aptix.ToolError()


@pytest.mark.parametrize("how", ["empty", "none"])
async def test_a_blank_tool_error_is_logged_as_a_failure_without_a_reason(
    context: AgentToolExecutionContext, how: str
) -> None:
    # docs/writing-a-tool.md: the same message and log record as a class tool's blank error.
    executor, logger = _executor(say_nothing)
    done = await executor.execute(
        AgentToolCall("c1", "say_nothing", f'{{"how": "{how}"}}'), context
    )
    assert done.error_message == (
        "The tool 'say_nothing' failed without saying why. This has been logged."
    )
    [record] = logger.records
    assert record.tag == "[say_nothing_ExecuteAsync__Contract]"


async def test_other_exceptions_are_logged_with_the_agn005_tag_and_hidden(
    context: AgentToolExecutionContext,
) -> None:
    executor, logger = _executor(read_sensor)
    done = await executor.execute(
        AgentToolCall("c1", "read_sensor", '{"place": {"city": "crash"}}'), context
    )
    assert done.error_message == (
        "The tool 'read_sensor' failed unexpectedly. The error has been logged."
    )
    assert "disk on fire" not in done.error_message
    [record] = logger.records
    assert record.tag == "[read_sensor_ExecuteAsync__Exception]"


async def test_sync_functions_run_too(context: AgentToolExecutionContext) -> None:
    @aptix.tool(usage="Call to add.", name="add_numbers")
    def add(a: int, b: int = 2) -> int:
        """Adds two numbers.

        :param a: The first number.
        :param b: The second number.
        """
        return a + b

    executor, _ = _executor(add)
    done = await executor.execute(AgentToolCall("c1", "add_numbers", '{"a": 40}'), context)
    assert done.result_json == "42"


def test_usage_is_required() -> None:
    async def f(x: int) -> int:
        """Doc.

        Args:
            x: A number.
        """
        return x

    with pytest.raises(ToolContractError, match="needs usage"):
        aptix.tool(f)
    with pytest.raises(ToolContractError, match="usage must be a non-empty str"):
        aptix.tool(usage="  ")(f)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("async def f(x: int) -> int:\n    return x", "needs a docstring"),
        ('async def f(x: int) -> int:\n    """Doc."""\n    return x', "'x' has no description"),
        ('async def f(x) -> int:\n    """Doc."""\n    return x', "'x' needs a type hint"),
        ('async def f(*x: int) -> int:\n    """Doc."""\n    return 1', "cannot be tool arguments"),
    ],
)
def test_functions_that_cannot_be_tools_are_refused_by_name(source: str, message: str) -> None:
    namespace: dict[str, object] = {}
    exec(source, namespace)
    with pytest.raises(ToolContractError, match=message) as caught:
        aptix.tool(usage="Use it.")(namespace["f"])  # type: ignore[arg-type]
    assert "Tool 'f'" in str(caught.value)


def test_a_bad_name_fails_the_same_registry_check_as_a_class() -> None:
    @aptix.tool(usage="Use it.", name="bad name!")
    async def f() -> None:
        """Does nothing."""

    registry = AgentToolRegistry(RecordingLogger())
    with pytest.raises(ToolContractError, match="must match"):
        registry.register(f)


class Node(BaseModel):
    children: list[Node] = []


def test_a_recursive_type_is_refused_naming_the_tool() -> None:
    async def tree(root: Node) -> None:
        """Walks a tree.

        Args:
            root: The root.
        """

    with pytest.raises(ToolContractError, match=r"Tool 'tree'.*refers to itself"):
        aptix.tool(usage="Use it.")(tree)


# --- every surface, with the tool loaded the way deployments load it (an entry point) ---


@pytest.fixture
async def plugin_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    entry = EntryPoint(
        name="weather_forecast",
        value="tests.tools.sample_tools:weather_forecast",
        group="aptix.tools",
    )
    monkeypatch.setattr("aptix.tools.plugins.entry_points", lambda group: [entry])
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=True,
        modes_path=modes_offering(tmp_path, "weather_forecast"),
    )
    async with open_runtime(settings) as runtime:
        yield runtime


async def test_runs_through_http_invoke(plugin_runtime: Runtime) -> None:
    app = create_app(runtime=plugin_runtime)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        listed = (await client.get("/v1/tools")).json()
        ok = await client.post(
            "/v1/tools/weather_forecast/invoke", json={"arguments": {"city": "Lisbon", "days": 2}}
        )
        failed = await client.post(
            "/v1/tools/weather_forecast/invoke", json={"arguments": {"city": " "}}
        )
    [row] = [r for r in listed if r["name"] == "weather_forecast"]
    [calculator] = [r for r in listed if r["name"] == "agent_calculator"]
    assert calculator["annotations"]["readOnlyHint"] is True
    assert row["schema"] == weather_forecast.schema()
    assert ok.json()["result"] == {"city": "Lisbon", "high_celsius": 22.0}
    assert failed.status_code == 200
    assert failed.json()["successful"] is False
    assert failed.json()["errors"] == [{"message": "Name a city."}]


async def test_runs_through_the_mcp_server(plugin_runtime: Runtime) -> None:
    async with Client(build_mcp_server(plugin_runtime)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("weather_forecast", {"city": "Oslo"})
    listed = tools["weather_forecast"]
    assert listed.input_schema["properties"]["days"]["maximum"] == 7
    assert listed.output_schema == weather_forecast.TOOL_OUTPUT_SCHEMA
    assert not result.is_error
    assert result.structured_content == {"city": "Oslo", "high_celsius": 21.0}


async def test_runs_in_a_model_turn(plugin_runtime: Runtime) -> None:
    model = ScriptedModel()
    model.add(
        reply(None, call("weather_forecast", {"city": "Porto", "days": 3}, id="w1")),
        reply("Porto: 23 °C."),
    )
    created = await plugin_runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    result = await plugin_runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction="Weather in Porto?"
    )
    assert result.text == "Porto: 23 °C."
    offered = {t["name"]: t for t in model.requests[0].tools}
    assert offered["weather_forecast"] == weather_forecast.schema()
    tool_message = model.requests[1].messages[-1]
    assert json.loads(tool_message["content"]) == {"city": "Porto", "high_celsius": 23.0}
    model.assert_complete()


async def test_a_tool_using_anyio_cancel_scopes_runs_through_the_executor(
    context: AgentToolExecutionContext,
) -> None:
    import anyio

    @aptix.tool(usage="Call to wait a little.")
    async def waits() -> str:
        """Waits inside a cancel scope, as httpx and the mcp SDK do."""
        with anyio.fail_after(5):
            await anyio.sleep(0.01)
        return "done"

    executor, logger = _executor(waits)
    done = await executor.execute(AgentToolCall("c1", "waits", "{}"), context)
    assert done.result_json == '"done"', done.error_message
    assert logger.records == []
