"""The system message: mode instructions, active workflow, tool usage and boot message."""

from __future__ import annotations

from aptix.llm.types import Message
from aptix.modes.models import ModeDefinition
from aptix.tools.registry import AgentToolRegistry

__all__ = ["system_message"]


def system_message(
    mode: ModeDefinition,
    tool_names: list[str],
    registry: AgentToolRegistry,
    boot_message: str,
    active_workflow: str = "",
) -> Message:
    """The system message for one model request.

    ``active_workflow`` states the session's workflow (or that none is active) beside its
    mode: each request carries the session's state, which can change outside the model's
    own calls (TUL-006 §6.4).
    """
    lines = [mode.instructions.strip(), "", f"Current mode: {mode.key} ({mode.display_name})."]
    if active_workflow:
        lines.append(active_workflow.strip())
    usage = [
        f"- {name}: {registry.usage_metadata(name)}"
        for name in tool_names
        if registry.usage_metadata(name)
    ]
    if usage:
        lines += ["", "# When to use your tools", *usage]
    if boot_message:
        lines += ["", boot_message.strip()]
    return {"role": "system", "content": "\n".join(lines)}
