"""Discovery of third-party tools from the ``aptix.tools`` entry-point group."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from aptix.errors import PluginLoadError, ToolContractError
from aptix.tools.base import AgentTool
from aptix.tools.registry import AgentToolRegistry
from aptix.tools.third_party import watching_sigint, why

__all__ = ["ENTRY_POINT_GROUP", "register_plugins"]

ENTRY_POINT_GROUP = "aptix.tools"


def register_plugins(
    registry: AgentToolRegistry, discovered: list[EntryPoint] | None = None
) -> list[str]:
    """Load every ``aptix.tools`` entry point and register it; return the names registered.

    Each entry point names an ``AgentTool`` subclass (built with the registry's logger) or a
    zero-argument factory function returning an ``AgentTool`` instance (called once, here).
    A plugin that fails to import (``sys.exit()`` included), whose factory fails, or that
    breaks the contract stops start-up with :class:`PluginLoadError` naming the plugin.
    """
    names: list[str] = []
    for ep in discovered if discovered is not None else entry_points(group=ENTRY_POINT_GROUP):
        where = f"'{ep.name}' ({ep.value})"
        with watching_sigint() as sigint:
            try:
                loaded = ep.load()
            except BaseException as exc:
                if sigint.is_real_interrupt(exc):
                    raise
                raise PluginLoadError(f"Could not load plugin {where}: {why(exc)}") from exc
        tool_cls, instance = _tool_of(loaded, where)
        try:
            if instance is None:
                registry.register(tool_cls)
            else:
                registry.register(tool_cls, _returning(instance))
        except ToolContractError as exc:
            raise PluginLoadError(f"Plugin {where} breaks the tool contract: {exc}") from exc
        names.append(tool_cls.TOOL_NAME)
    return names


def _tool_of(loaded: Any, where: str) -> tuple[Any, AgentTool | None]:
    """The tool class an entry point names, with the instance its factory built (if any)."""
    if inspect.isclass(loaded) or not callable(loaded):
        return loaded, None  # the registry's checks say what is wrong with a non-tool
    with watching_sigint() as sigint:
        try:
            instance = loaded()
        except BaseException as exc:
            if sigint.is_real_interrupt(exc):
                raise
            raise PluginLoadError(f"Plugin {where}: its factory raised {why(exc)}") from exc
    if not isinstance(instance, AgentTool):
        raise PluginLoadError(
            f"Plugin {where}: its factory returned {type(instance).__name__}, "
            "not an AgentTool instance."
        )
    return type(instance), instance


def _returning(instance: AgentTool) -> Callable[[], AgentTool]:
    return lambda: instance
