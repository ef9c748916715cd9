"""Building the system message: mode instructions, tool usage guidance and the boot message."""

from __future__ import annotations

from aptix.llm.types import Message
from aptix.modes.models import ModeDefinition
from aptix.tools.registry import AgentToolRegistry

__all__ = ["system_message"]


def system_message(
    mode: ModeDefinition, tool_names: list[str], registry: AgentToolRegistry, boot_message: str
) -> Message:
    """The system message for one model request."""
    lines = [mode.instructions.strip(), "", f"Current mode: {mode.key} ({mode.display_name})."]
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
