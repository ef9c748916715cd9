"""``agent_list_modes``: the read-only mode catalog tool (TUL-010)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from aptix.logger import AdminLogger
from aptix.modes.catalog import ModeCatalog
from aptix.results import InvokeResult
from aptix.tools.args import ToolArgs, ToolResult, function_schema, parse_arguments
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolExecutionContext

__all__ = ["ListModesTool"]


class _Args(ToolArgs):
    include_examples: bool | None = Field(
        None,
        description="When true, include example user requests for each mode where available.",
    )


class _ModeSummary(ToolResult):
    id: str
    key: str
    display_name: str
    description: str
    system_prompt_summary: str
    is_default: bool
    human_role_hints: tuple[str, ...] | None
    example_utterances: tuple[str, ...] | None


class _Result(ToolResult):
    modes: list[_ModeSummary]


class ListModesTool(AgentTool):
    """Returns every configured mode with its summary; never changes anything."""

    TOOL_NAME = "agent_list_modes"
    TOOL_USAGE_METADATA = (
        "Call this tool when the user asks what modes are available, wants help understanding "
        "or choosing between modes, or when you are about to propose a mode change and want to "
        "present the options with their descriptions. Do not call it on every user message, "
        "nor when you already know the current mode and need no options, and never as a "
        "substitute for agent_change_mode: this tool is informational only and changes nothing."
    )
    is_fully_executed_on_server = True
    TOOL_ANNOTATIONS: ClassVar[dict[str, Any] | None] = {
        "title": "List modes",
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }

    def __init__(self, catalog: ModeCatalog | None, logger: AdminLogger) -> None:
        self._catalog = catalog
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema (no required properties)."""
        return function_schema(
            cls.TOOL_NAME,
            "Lists the available agent modes with their key, name, description and whether "
            "each is the default; read-only.",
            _Args,
        )

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Return the ``modes`` payload."""
        parsed = parse_arguments(_Args, arguments_json)
        if parsed.result is None:
            return InvokeResult(errors=parsed.errors)
        include_examples = bool(parsed.result.include_examples)
        ids = context.log_pairs()
        try:
            modes = await self._catalog.get_all_modes() if self._catalog else None
        except Exception as exc:
            self._logger.add_exception(f"[{self.TOOL_NAME}_ExecuteAsync__Exception]", exc, *ids)
            return InvokeResult.from_error("ListModesTool could not read the mode catalog.")
        if modes is None:
            self._logger.add_error(
                f"[{self.TOOL_NAME}_ExecuteAsync]", "The mode catalog returned no modes.", *ids
            )
            return InvokeResult.from_error("ListModesTool could not read the mode catalog.")
        result = _Result(
            modes=[
                _ModeSummary(
                    id=m.id,
                    key=m.key,
                    display_name=m.display_name,
                    description=m.description,
                    system_prompt_summary=m.system_prompt_summary,
                    is_default=m.is_default,
                    human_role_hints=m.human_role_hints,
                    example_utterances=m.example_utterances if include_examples else None,
                )
                for m in modes
            ]
        )
        return InvokeResult.create(result.to_json())
