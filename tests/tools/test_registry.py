from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

import pytest

from aptix import AgentTool, AgentToolRegistry, InvokeResult, ToolContractError
from aptix.runtime import BUILTIN_TOOLS, Runtime, build_registry
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.hello_world import HelloWorldTool


def _schema(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": "A test tool.",
        "parameters": {
            "type": "object",
            "properties": {"x": {"type": "string", "description": "An x."}},
            "required": ["x"],
        },
    }


class _Base(AgentTool):
    TOOL_NAME: ClassVar[str] = "good_tool"
    TOOL_USAGE_METADATA: ClassVar[str] = "Use it in tests."

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return _schema(cls.TOOL_NAME)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create("{}")


def _make(**attrs: Any) -> type[AgentTool]:
    return type("BrokenTool", (_Base,), attrs)


def _assert_refused(tool_cls: Any, fragment: str) -> None:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    with pytest.raises(ToolContractError, match=fragment) as raised:
        registry.register(tool_cls)
    assert len(logger.errors) == 1
    assert logger.errors[0].message == str(raised.value)
    assert logger.errors[0].tag == "[AgentToolRegistry_Register]"
    assert registry.registered_tools == ()


def test_a_valid_tool_registers_and_resolves() -> None:
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(_Base)
    assert registry.has_tool("good_tool")
    assert registry.has_tool("GOOD_TOOL")
    assert registry.get_tool_type("good_tool") is _Base
    assert isinstance(registry.get_tool("good_tool"), _Base)
    assert registry.registered_tools == ("good_tool",)
    assert registry.schemas() == [_schema("good_tool")]


def test_missing_tool_name_is_refused() -> None:
    class NoName(AgentTool):
        TOOL_USAGE_METADATA = "x"

        @classmethod
        def schema(cls) -> dict[str, Any]:
            return _schema("x")

        async def execute(
            self, arguments_json: str, context: AgentToolExecutionContext
        ) -> InvokeResult[str]:
            return InvokeResult.create("{}")

    _assert_refused(NoName, "does not declare TOOL_NAME")


def test_empty_tool_name_is_refused() -> None:
    _assert_refused(_make(TOOL_NAME=""), "must not be empty")


def test_non_string_tool_name_is_refused() -> None:
    _assert_refused(_make(TOOL_NAME=42), "must be a str")


@pytest.mark.parametrize("name", ["has space", "dots.not.allowed", "ümlaut", "semi;colon"])
def test_badly_patterned_tool_name_is_refused(name: str) -> None:
    _assert_refused(_make(TOOL_NAME=name), "must match")


def test_missing_schema_is_refused() -> None:
    class NoSchema(AgentTool):
        TOOL_NAME = "no_schema"
        TOOL_USAGE_METADATA = "x"

        async def execute(
            self, arguments_json: str, context: AgentToolExecutionContext
        ) -> InvokeResult[str]:
            return InvokeResult.create("{}")

    _assert_refused(NoSchema, "does not define schema")


def test_instance_method_schema_is_refused() -> None:
    def schema(self: Any) -> dict[str, Any]:
        return _schema("good_tool")

    _assert_refused(_make(schema=schema), "classmethod or staticmethod")


def test_parameterised_schema_is_refused() -> None:
    def schema(cls: Any, verbose: bool) -> dict[str, Any]:
        return _schema("good_tool")

    _assert_refused(_make(schema=classmethod(schema)), "take no arguments")


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ([], "must return a dict"),
        ({**_schema("good_tool"), "type": "tool"}, "type 'function'"),
        ({**_schema("good_tool"), "description": " "}, "non-empty 'description'"),
        ({**_schema("good_tool"), "parameters": {"type": "array"}}, "of type 'object'"),
        (
            {**_schema("good_tool"), "parameters": {"type": "object", "properties": {}}},
            "parameters.required",
        ),
        (
            {
                **_schema("good_tool"),
                "parameters": {
                    "type": "object",
                    "properties": {"x": {"type": "date", "description": "d"}},
                    "required": [],
                },
            },
            "simple JSON type",
        ),
        (
            {
                **_schema("good_tool"),
                "parameters": {
                    "type": "object",
                    "properties": {"x": {"type": "string"}},
                    "required": [],
                },
            },
            "must have a description",
        ),
        (
            {
                **_schema("good_tool"),
                "parameters": {"type": "object", "properties": {}, "required": ["y"]},
            },
            "not defined",
        ),
    ],
)
def test_wrong_shape_schema_is_refused(schema: Any, fragment: str) -> None:
    _assert_refused(_make(schema=staticmethod(lambda: schema)), fragment)


def test_schema_that_raises_is_refused() -> None:
    def schema() -> dict[str, Any]:
        raise RuntimeError("boom")

    _assert_refused(_make(schema=staticmethod(schema)), "raised")


def test_schema_name_different_from_tool_name_is_refused() -> None:
    _assert_refused(_make(schema=staticmethod(lambda: _schema("other"))), "differs from TOOL_NAME")


def test_missing_usage_metadata_is_refused() -> None:
    class NoUsage(AgentTool):
        TOOL_NAME = "no_usage"

        @classmethod
        def schema(cls) -> dict[str, Any]:
            return _schema("no_usage")

        async def execute(
            self, arguments_json: str, context: AgentToolExecutionContext
        ) -> InvokeResult[str]:
            return InvokeResult.create("{}")

    _assert_refused(NoUsage, "does not declare TOOL_USAGE_METADATA")


@pytest.mark.parametrize("usage", ["", "   ", 7])
def test_empty_usage_metadata_is_refused(usage: Any) -> None:
    _assert_refused(_make(TOOL_USAGE_METADATA=usage), "TOOL_USAGE_METADATA must be")


def test_not_a_tool_class_is_refused() -> None:
    _assert_refused(object, "not a subclass of AgentTool")


def test_duplicate_name_in_another_case_is_refused_and_first_stays() -> None:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(_Base)
    upper = type(
        "UpperTool",
        (_Base,),
        {"TOOL_NAME": "GOOD_TOOL", "schema": staticmethod(lambda: _schema("GOOD_TOOL"))},
    )
    with pytest.raises(ToolContractError, match="already registered"):
        registry.register(upper)
    assert len(logger.errors) == 1
    assert registry.registered_tools == ("good_tool",)
    assert registry.get_tool_type("GOOD_TOOL") is _Base


def test_factory_builds_the_instance_once() -> None:
    built: list[HelloWorldTool] = []
    logger = RecordingLogger()

    def factory() -> HelloWorldTool:
        built.append(HelloWorldTool(logger))
        return built[-1]

    registry = AgentToolRegistry(logger)
    registry.register(HelloWorldTool, factory)
    assert built == []
    assert registry.get_tool("agent_hello_world") is registry.get_tool("agent_hello_world")
    assert len(built) == 1


async def test_production_registry_builds_without_raising(runtime: Runtime) -> None:
    logger = RecordingLogger()
    registry = build_registry(replace(runtime.services, logger=logger), plugins=True)
    assert set(registry.registered_tools) >= {t.TOOL_NAME for t in BUILTIN_TOOLS}
    for name in registry.registered_tools:
        assert registry.get_tool(name) is not None
    assert logger.errors == []
