"""``agent_list_modes``: the read-only mode catalog tool (TUL-010)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictBool

from aptix.logger import AdminLogger
from aptix.modes.catalog import ModeCatalog
from aptix.results import InvokeResult
from aptix.tools.args import ToolArgs, ToolResult
from aptix.tools.builtin.base import BuiltinTool, Refusal, hints
from aptix.tools.context import AgentToolExecutionContext

__all__ = ["ListModesTool"]


class _Args(ToolArgs):
    # Strict, as every built-in flag: "yes", "on", 1 or "0" are refused, not read as one.
    include_examples: StrictBool | None = Field(
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


class ListModesTool(BuiltinTool[_Args, _Result]):
    """Returns every configured mode with its summary; never changes anything."""

    TOOL_NAME = "agent_list_modes"
    TOOL_USAGE_METADATA = (
        "Call this tool when the user asks what modes are available, wants help understanding "
        "or choosing between modes, or when you are about to propose a mode change and want to "
        "present the options with their descriptions. Do not call it on every user message, "
        "nor when you already know the current mode and need no options, and never as a "
        "substitute for agent_change_mode: this tool is informational only and changes nothing."
    )
    TOOL_ANNOTATIONS = hints("List modes", read_only=True, idempotent=True)
    FAILURE = "ListModesTool could not read the mode catalog."

    def __init__(self, catalog: ModeCatalog | None, logger: AdminLogger) -> None:
        super().__init__(logger)
        self._catalog = catalog

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema (no required properties)."""
        return cls.function_schema(
            "Lists the available agent modes with their key, name, description and whether "
            "each is the default; read-only."
        )

    async def run(self, args: _Args, context: AgentToolExecutionContext) -> _Result | Refusal:
        """Return the ``modes`` payload."""
        modes = await self._catalog.get_all_modes() if self._catalog else None
        if modes is None:
            self._logger.add_error(
                f"[{self.TOOL_NAME}_ExecuteAsync]",
                "The mode catalog returned no modes.",
                *context.log_pairs(),
            )
            return InvokeResult.from_error(self.FAILURE)
        return _Result(
            modes=[
                _ModeSummary(
                    id=m.id,
                    key=m.key,
                    display_name=m.display_name,
                    description=m.description,
                    system_prompt_summary=m.system_prompt_summary,
                    is_default=m.is_default,
                    human_role_hints=m.human_role_hints,
                    example_utterances=m.example_utterances if args.include_examples else None,
                )
                for m in modes
            ]
        )
