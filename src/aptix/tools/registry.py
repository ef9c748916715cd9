"""``AgentToolRegistry``: checks each tool class against the contract and holds the valid ones."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aptix.errors import ToolContractError
from aptix.logger import AdminLogger
from aptix.tools.args import SIMPLE_TYPES
from aptix.tools.base import AgentTool
from aptix.tools.third_party import watching_sigint, why

__all__ = ["AgentToolRegistry", "ToolFactory"]

TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]+")
#: The longest function name OpenAI-style APIs accept: a longer one fails every model call.
MAX_TOOL_NAME = 64
_LOG_TAG = "[AgentToolRegistry_Register]"

ToolFactory = Callable[[], AgentTool]


@dataclass(slots=True)
class _Entry:
    tool_cls: type[AgentTool]
    factory: ToolFactory
    schema: dict[str, Any]
    in_thread: bool
    instance: AgentTool | None = None
    #: ``is_fully_executed_on_server`` as the built instance answers it; None until built.
    server_final: bool | None = None


class AgentToolRegistry:
    """The set of tools offered to the model, each checked once at registration."""

    def __init__(self, logger: AdminLogger) -> None:
        self._logger = logger
        self._entries: dict[str, _Entry] = {}
        self._exact: dict[str, AgentTool] = {}

    def register(self, tool_cls: type[AgentTool], factory: ToolFactory | None = None) -> None:
        """Check ``tool_cls`` against the contract and register it.

        ``factory`` builds the instance with its services; by default the class is called
        with the registry's logger. On the first broken rule the problem is logged once and
        :class:`ToolContractError` is raised; nothing is registered. A class registered
        already (one tool reached by two routes, a plugin and a tool module) is left as it
        was, with its first factory; another class with the same name is refused.
        """
        if any(entry.tool_cls is tool_cls for entry in self._entries.values()):
            return
        try:
            with watching_sigint() as sigint:
                try:
                    name, schema = self._check(tool_cls)
                except ToolContractError:
                    raise
                except BaseException as exc:  # a malformed class (or sys.exit() in schema())
                    if sigint.is_real_interrupt(exc):
                        raise
                    raise ToolContractError(
                        f"{_describe(tool_cls)} could not be checked against the tool contract: "
                        f"{why(exc)}"
                    ) from exc
        except ToolContractError as exc:
            self._logger.add_error(_LOG_TAG, str(exc), ("Tool", _describe(tool_cls)))
            raise
        build = factory or (lambda: tool_cls(self._logger))  # type: ignore[call-arg]
        in_thread = not inspect.iscoroutinefunction(tool_cls.execute)
        self._entries[name.casefold()] = _Entry(tool_cls, build, schema, in_thread)

    def unregister(self, name: str) -> None:
        """Stop offering ``name`` (any case); a call already running keeps its instance.

        For a tool source whose tools change while Aptix runs (an MCP server that announces
        a new tool list). An unknown name is ignored.
        """
        entry = self._entries.pop(name.casefold(), None)
        if entry is not None:
            self._exact.pop(entry.tool_cls.TOOL_NAME, None)

    def with_client_tools(self, tools: Sequence[type[AgentTool]]) -> AgentToolRegistry:
        """A registry for one request: this one's tools plus ``tools`` declared by a client.

        Client tools skip the deployment's contract checks (they are the client's
        declarations, passed on as written) but never shadow a tool of the deployment nor
        each other: :class:`ToolContractError` names the first clash.
        """
        child = AgentToolRegistry(self._logger)
        child._entries = dict(self._entries)
        child._exact = dict(self._exact)  # a cache: a client tool must not enter ours
        listed: dict[str, str] = {}  # casefolded name -> the name as the client first wrote it
        for tool_cls in tools:
            name = tool_cls.TOOL_NAME
            if not TOOL_NAME_PATTERN.fullmatch(name) or len(name) > MAX_TOOL_NAME:
                raise ToolContractError(
                    f"The client tool name {name!r} must match {TOOL_NAME_PATTERN.pattern} "
                    f"and be at most {MAX_TOOL_NAME} characters long."
                )
            if (first := listed.get(name.casefold())) is not None:
                same = "" if first == name else f" (as {first!r} and {name!r})"
                raise ToolContractError(
                    f"The request lists the client tool {name!r} twice{same}; names are "
                    "compared case-insensitively, so list each tool once."
                )
            listed[name.casefold()] = name
            if name.casefold() in child._entries:
                raise ToolContractError(
                    f"The client tool {name!r} has the name of a tool this deployment already "
                    "has (names are compared case-insensitively); rename it."
                )
            child._entries[name.casefold()] = _Entry(
                tool_cls, self._factory(tool_cls), tool_cls.schema(), False
            )
        return child

    def _factory(self, tool_cls: type[AgentTool]) -> ToolFactory:
        return lambda: tool_cls(self._logger)  # type: ignore[call-arg]

    def build_all(self) -> None:
        """Build every registered tool now, so a failing constructor stops start-up.

        Raises :class:`ToolContractError` naming the first tool whose factory raised (and logs
        it); the tools built before it stay built.
        """
        for entry in self._entries.values():
            name = entry.tool_cls.TOOL_NAME
            with watching_sigint() as sigint:
                try:
                    self.get_tool(name)
                except BaseException as exc:  # sys.exit() in a constructor must not end serve
                    if sigint.is_real_interrupt(exc):
                        raise
                    message = f"Tool {name!r} could not be built: {why(exc)}"
                    self._logger.add_error(_LOG_TAG, message, ("Tool", _describe(entry.tool_cls)))
                    raise ToolContractError(message) from exc

    def runs_in_thread(self, name: str) -> bool:
        """True when the tool's ``execute`` is a plain function, run in a worker thread."""
        entry = self._entries.get(name.casefold())
        return entry is not None and entry.in_thread

    def _check(self, tool_cls: Any) -> tuple[str, dict[str, Any]]:
        who = _describe(tool_cls)
        if not (inspect.isclass(tool_cls) and issubclass(tool_cls, AgentTool)):
            raise ToolContractError(f"{who} is not a subclass of AgentTool.")
        name = getattr(tool_cls, "TOOL_NAME", None)
        if name is None:
            raise ToolContractError(f"{who} does not declare TOOL_NAME.")
        if not isinstance(name, str):
            raise ToolContractError(f"{who}: TOOL_NAME must be a str, not {type(name).__name__}.")
        if not name:
            raise ToolContractError(f"{who}: TOOL_NAME must not be empty.")
        if not TOOL_NAME_PATTERN.fullmatch(name):
            raise ToolContractError(
                f"{who}: TOOL_NAME {name!r} must match {TOOL_NAME_PATTERN.pattern}."
            )
        if len(name) > MAX_TOOL_NAME:
            raise ToolContractError(
                f"{who}: TOOL_NAME {name!r} is {len(name)} characters long; model APIs accept "
                f"at most {MAX_TOOL_NAME}."
            )
        schema = _check_schema(tool_cls, name)
        _check_server_final(tool_cls, name)
        usage = getattr(tool_cls, "TOOL_USAGE_METADATA", None)
        if usage is None:
            raise ToolContractError(f"Tool {name!r} does not declare TOOL_USAGE_METADATA.")
        if not isinstance(usage, str) or not usage.strip():
            raise ToolContractError(f"Tool {name!r}: TOOL_USAGE_METADATA must be a non-empty str.")
        existing = self._entries.get(name.casefold())
        if existing is not None:
            raise ToolContractError(
                f"Tool {name!r} is already registered as {existing.tool_cls.TOOL_NAME!r} "
                f"by {_describe(existing.tool_cls)} (names are compared case-insensitively)"
                f"{_same_file_hint(existing.tool_cls, tool_cls)}."
            )
        return name, schema

    def has_tool(self, name: str) -> bool:
        """True when a tool of that name (any case) is registered."""
        return name.casefold() in self._entries

    def get_tool_type(self, name: str) -> type[AgentTool] | None:
        """The registered class for ``name``, or None."""
        entry = self._entries.get(name.casefold())
        return entry.tool_cls if entry else None

    def asks_approval(self, name: str) -> bool:
        """Whether ``name`` has an approved run: its call asks a person first, then runs."""
        return hasattr(self.get_tool_type(name), "run_approved")

    def get_tool(self, name: str) -> AgentTool | None:
        """The tool instance for ``name`` (built on first use), or None."""
        tool = self._exact.get(name)
        if tool is not None:
            return tool
        entry = self._entries.get(name.casefold())
        if entry is None:
            return None
        if entry.instance is None:
            instance = entry.factory()
            entry.server_final = _built_server_final(instance, entry.tool_cls.TOOL_NAME)
            entry.instance = instance
            self._exact[entry.tool_cls.TOOL_NAME] = instance
        return entry.instance

    def server_final(self, name: str) -> bool | None:
        """Whether ``name`` finishes on the server (AGN-005), or None when no tool has that name.

        The one reading every surface uses (executor, reasoner, ``GET /v1/tools``, MCP, CLI).
        It is the built instance's ``is_fully_executed_on_server``, read once when the tool is
        built: AGN-005 declares it as an instance property, so a property works like a class
        attribute, and a value that changed later could not make the surfaces disagree.
        """
        entry = self._entries.get(name.casefold())
        if entry is None:
            return None
        if entry.server_final is None:
            self.get_tool(entry.tool_cls.TOOL_NAME)  # builds it and reads the flag
        return entry.server_final

    @property
    def registered_tools(self) -> tuple[str, ...]:
        """The registered tool names, in registration order."""
        return tuple(e.tool_cls.TOOL_NAME for e in self._entries.values())

    def schemas(self, names: set[str] | frozenset[str] | None = None) -> list[dict[str, Any]]:
        """The schemas of all tools, or of those named in ``names``, in registration order."""
        return [
            dict(e.schema)
            for e in self._entries.values()
            if names is None or e.tool_cls.TOOL_NAME in names
        ]

    def usage_metadata(self, name: str) -> str | None:
        """The ``TOOL_USAGE_METADATA`` of ``name``, or None."""
        tool_cls = self.get_tool_type(name)
        return tool_cls.TOOL_USAGE_METADATA if tool_cls else None


def _describe(tool_cls: Any) -> str:
    if inspect.isclass(tool_cls):
        return f"{tool_cls.__module__}.{tool_cls.__qualname__}"
    return repr(tool_cls)


def _same_file_hint(first: type[AgentTool], second: type[AgentTool]) -> str:
    """Why one file's class is two classes: imported by its path and by its module name."""
    if first.__qualname__ != second.__qualname__ or first.__module__ == second.__module__:
        return ""  # two classes of one module (MCP tools are built at run time): not that
    try:
        source = inspect.getsourcefile(first)
        if source is None or source != inspect.getsourcefile(second):
            return ""
    except (TypeError, OSError):  # a class without a source file (built at run time)
        return ""
    return (
        f"; both come from {source}, imported twice: name it by its module, "
        f"{first.__module__}, or leave it out of APTIX_TOOL_MODULES if a plugin loads it"
    )


def _check_server_final(tool_cls: type[AgentTool], name: str) -> None:
    """Refuse an ``is_fully_executed_on_server`` that no instance could answer with a bool.

    A bool class attribute and a property (AGN-005 writes ``IsToolFullyExecutedOnServer`` as
    one) are both fine; the instance's answer is checked again when the tool is built.
    """
    raw = inspect.getattr_static(tool_cls, "is_fully_executed_on_server")
    if isinstance(raw, bool | property | functools.cached_property):
        return
    kind = "a method" if inspect.isfunction(raw) else type(raw).__name__
    raise ToolContractError(
        f"Tool {name!r}: is_fully_executed_on_server must be a bool, as a class attribute "
        f"(is_fully_executed_on_server = False) or a property returning one, not {kind}."
    )


def _built_server_final(tool: AgentTool, name: str) -> bool:
    """The built ``tool``'s ``is_fully_executed_on_server``; a non-bool answer is refused."""
    try:
        value = tool.is_fully_executed_on_server
    except Exception as exc:
        raise ToolContractError(
            f"Tool {name!r}: reading is_fully_executed_on_server raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(value, bool):
        # Truthiness would turn "false" or a forgotten call into server-final: refuse instead.
        raise ToolContractError(
            f"Tool {name!r}: is_fully_executed_on_server must be a bool, "
            f"not {type(value).__name__}."
        )
    return value


def _check_schema(tool_cls: type[AgentTool], name: str) -> dict[str, Any]:
    raw = inspect.getattr_static(tool_cls, "schema", None)
    if raw is None or getattr(raw, "__isabstractmethod__", False):
        raise ToolContractError(f"Tool {name!r} does not define schema().")
    if not isinstance(raw, classmethod | staticmethod):
        raise ToolContractError(f"Tool {name!r}: schema must be a classmethod or staticmethod.")
    if inspect.signature(tool_cls.schema).parameters:
        raise ToolContractError(f"Tool {name!r}: schema() must take no arguments.")
    try:
        schema = tool_cls.schema()
    except Exception as exc:
        raise ToolContractError(f"Tool {name!r}: schema() raised {exc!r}.") from exc
    problem = schema_problem(schema)
    if problem:
        raise ToolContractError(f"Tool {name!r}: schema() {problem}")
    if schema["name"] != name:
        raise ToolContractError(
            f"Tool {name!r}: schema name {schema['name']!r} differs from TOOL_NAME."
        )
    return schema


def schema_problem(schema: Any) -> str | None:
    """Describe how ``schema`` breaks the TUL-011 §4 shape, or None when it is well formed."""
    if not isinstance(schema, dict):
        return f"must return a dict, not {type(schema).__name__}."
    if schema.get("type") != "function":
        return "must have type 'function'."
    if not isinstance(schema.get("name"), str):
        return "must have a string 'name'."
    description = schema.get("description")
    if not isinstance(description, str) or not description.strip():
        return "must have a non-empty 'description'."
    params = schema.get("parameters")
    if not isinstance(params, dict) or params.get("type") != "object":
        return "must have 'parameters' of type 'object'."
    props = params.get("properties")
    required = params.get("required")
    if not isinstance(props, dict) or not isinstance(required, list):
        return "must have 'parameters.properties' (object) and 'parameters.required' (array)."
    for key, prop in props.items():
        if not isinstance(prop, dict) or not _declares_type(prop):
            return (
                f"property {key!r} must declare a simple JSON type (or a list of them with 'null')."
            )
        if not isinstance(prop.get("description"), str) or not prop["description"].strip():
            return f"property {key!r} must have a description."
    unknown = [r for r in required if r not in props]
    if unknown:
        return f"lists required properties that are not defined: {unknown}."
    twice = sorted({r for r in required if required.count(r) > 1})
    if twice:
        return f"lists required properties more than once: {twice}."
    return None


def _declares_type(prop: dict[str, Any]) -> bool:
    """True when ``prop`` names JSON types: one, a nullable list, or ``anyOf`` alternatives."""
    kind = prop.get("type")
    if isinstance(kind, str):
        return kind in SIMPLE_TYPES
    if isinstance(kind, list):
        # Only strings are looked up: a nested list would be an unhashable TypeError.
        return (
            all(isinstance(k, str) for k in kind)
            and any(k in SIMPLE_TYPES for k in kind)
            and all(k in SIMPLE_TYPES or k == "null" for k in kind)
        )
    options = prop.get("anyOf")
    if not isinstance(options, list) or not options:
        return False
    return all(
        isinstance(o, dict) and (o.get("type") == "null" or _declares_type(o)) for o in options
    )
