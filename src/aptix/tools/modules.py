"""Tools from Python files and modules: ``APTIX_TOOL_MODULES`` and ``aptix serve --tools``.

Each entry is a path to a ``.py`` file or an importable module name. Every ``@aptix.tool``
function and every concrete ``AgentTool`` subclass *defined* in it (not imported into it) is
registered, through the same contract checks as the ``aptix.tools`` entry points (a class
whose name starts with ``_`` is left out, for a shared base class of the file's tools). A file
that does not exist, fails to import, holds no tool, or holds a tool that breaks the contract
stops start-up with :class:`~aptix.errors.PluginLoadError` naming the file.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from aptix.errors import PluginLoadError, ToolContractError
from aptix.tools.base import AgentTool
from aptix.tools.registry import AgentToolRegistry
from aptix.tools.third_party import watching_sigint, why

__all__ = ["LoadedTool", "load_tool_modules", "register_tool_modules"]


@dataclass(frozen=True, slots=True)
class LoadedTool:
    """A tool class found in ``source`` (the file or module named in the settings)."""

    source: str
    tool_cls: type[AgentTool]


def load_tool_modules(entries: Iterable[str]) -> list[LoadedTool]:
    """Import each file or module and collect the tools defined in it, in source order.

    A file named twice (``APTIX_TOOL_MODULES`` and ``--tools``, two spellings of one path, a
    module and its file) is loaded once.
    """
    found: list[LoadedTool] = []
    seen: set[str] = set()
    for entry in entries:
        module = _import(entry)
        origin = getattr(module, "__file__", None)
        key = str(Path(origin).resolve()) if origin else module.__name__
        if key in seen:
            continue
        seen.add(key)
        tools = [
            LoadedTool(entry, obj)
            for obj in vars(module).values()
            if inspect.isclass(obj)
            and issubclass(obj, AgentTool)
            and obj.__module__ == module.__name__
            and not obj.__name__.startswith("_")  # a private base class of the file's tools
        ]
        if not tools:
            raise PluginLoadError(
                f"No tools in {entry}: decorate an async function with @aptix.tool, or define "
                "an AgentTool subclass there."
            )
        found.extend(tools)
    return found


def register_tool_modules(registry: AgentToolRegistry, tools: Iterable[LoadedTool]) -> list[str]:
    """Register and build the tools :func:`load_tool_modules` found; return their names.

    A refusal or a constructor that raises is a :class:`PluginLoadError` naming the class and
    its file.
    """
    names: list[str] = []
    for loaded in tools:
        where = f"Tool {loaded.tool_cls.__name__} in {loaded.source}"
        try:
            registry.register(loaded.tool_cls)
        except ToolContractError as exc:
            raise PluginLoadError(f"{where} breaks the tool contract: {exc}") from exc
        with watching_sigint() as sigint:
            try:
                registry.get_tool(loaded.tool_cls.TOOL_NAME)
            except BaseException as exc:  # sys.exit() in a constructor too
                if sigint.is_real_interrupt(exc):
                    raise
                raise PluginLoadError(f"{where} could not be built: {why(exc)}") from exc
        names.append(loaded.tool_cls.TOOL_NAME)
    return names


def _is_path(entry: str) -> bool:
    return entry.endswith(".py") or "/" in entry or "\\" in entry


def _import(entry: str) -> ModuleType:
    if not _is_path(entry):
        with watching_sigint() as sigint:
            try:
                return importlib.import_module(entry)
            except BaseException as exc:  # sys.exit() at import too: one line naming the module
                if sigint.is_real_interrupt(exc):
                    raise
                raise PluginLoadError(f"Could not import tool module {entry}: {why(exc)}") from exc
    path = Path(entry).expanduser().resolve()
    if not path.is_file():
        if path.is_dir():
            raise PluginLoadError(f"Tool file {entry} is a directory; name a Python file in it.")
        if path.exists():
            raise PluginLoadError(f"Tool file {entry} is not a regular file.")
        raise PluginLoadError(f"Tool file {entry} does not exist.")
    # One module name per file, stable across imports of the same path.
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"aptix_tool_file_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PluginLoadError(f"Tool file {entry} is not a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up while it runs
    with watching_sigint() as sigint:
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # sys.exit() at import too: one line naming the file
            del sys.modules[name]
            if sigint.is_real_interrupt(exc):
                raise
            raise PluginLoadError(f"Could not load tool file {entry}: {why(exc)}") from exc
    return module
