"""Functions and classes that cannot serve as tools are refused before a model sees them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import aptix
from aptix import AgentTool, AgentToolRegistry, InvokeResult, ToolContractError
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext


def test_two_parameters_with_one_wire_name_are_refused_naming_both() -> None:
    async def alias_clash(user_id: str, userId: str) -> str:
        """Clashes.

        Args:
            user_id: One.
            userId: Two.
        """
        return user_id + userId

    with pytest.raises(ToolContractError, match="'user_id' and 'userId' are both 'userId'"):
        aptix.tool(usage="Clashes.")(alias_clash)


def test_a_schema_listing_a_required_property_twice_is_refused() -> None:
    class Twice(AgentTool):
        TOOL_NAME = "twice"
        TOOL_USAGE_METADATA = "Lists q twice."

        @classmethod
        def schema(cls) -> dict[str, Any]:
            q = {"type": "string", "description": "Q."}
            parameters = {"type": "object", "properties": {"q": q}, "required": ["q", "q"]}
            return {
                "type": "function",
                "name": "twice",
                "description": "T.",
                "parameters": parameters,
            }

        async def execute(
            self, arguments_json: str, context: AgentToolExecutionContext
        ) -> InvokeResult[str]:
            return InvokeResult.create("{}")

    registry = AgentToolRegistry(RecordingLogger())
    with pytest.raises(ToolContractError, match=r"required properties more than once: \['q'\]"):
        registry.register(Twice)


def test_an_async_generator_function_is_refused_at_decoration() -> None:
    async def agen(n: int) -> AsyncIterator[int]:
        """Yields numbers.

        Args:
            n: How many.
        """
        for i in range(n):
            yield i

    with pytest.raises(ToolContractError, match=r"'agen' .* is a generator function"):
        aptix.tool(usage="Yields.")(agen)


def test_a_generator_function_is_refused_at_decoration() -> None:
    def gen(n: int) -> Iterator[int]:
        """Yields numbers.

        Args:
            n: How many.
        """
        yield from range(n)

    with pytest.raises(ToolContractError, match="return a list of the items instead"):
        aptix.tool(usage="Yields.")(gen)


def test_a_tool_name_longer_than_64_characters_is_refused_at_registration() -> None:
    async def long() -> str:
        """Has a long name."""
        return "x"

    registry = AgentToolRegistry(RecordingLogger())
    registry.register(aptix.tool(usage="Long.", name="t" * 64)(long))
    with pytest.raises(ToolContractError, match="is 65 characters long; model APIs accept at most"):
        registry.register(aptix.tool(usage="Long.", name="u" * 65)(long))
    with pytest.raises(ToolContractError, match="at most 64 characters"):
        registry.with_client_tools([aptix.tool(usage="Long.", name="v" * 65)(long)])
