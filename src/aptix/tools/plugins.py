"""Discovery of third-party tools from the ``aptix.tools`` entry-point group."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from aptix.errors import PluginLoadError, ToolContractError
from aptix.tools.registry import AgentToolRegistry

__all__ = ["ENTRY_POINT_GROUP", "register_plugins"]

ENTRY_POINT_GROUP = "aptix.tools"


def register_plugins(
    registry: AgentToolRegistry, discovered: list[EntryPoint] | None = None
) -> list[str]:
    """Load every ``aptix.tools`` entry point and register it; return the names registered.

    Each entry point names an ``AgentTool`` subclass (built with the registry's logger) or a
    zero-argument callable returning one. A plugin that fails to import or breaks the
    contract stops start-up with :class:`PluginLoadError` naming the plugin.
    """
    names: list[str] = []
    for ep in discovered if discovered is not None else entry_points(group=ENTRY_POINT_GROUP):
        where = f"'{ep.name}' ({ep.value})"
        try:
            tool_cls = ep.load()
        except Exception as exc:
            raise PluginLoadError(f"Could not load plugin {where}: {exc}") from exc
        try:
            registry.register(tool_cls)
        except ToolContractError as exc:
            raise PluginLoadError(f"Plugin {where} breaks the tool contract: {exc}") from exc
        names.append(tool_cls.TOOL_NAME)
    return names
