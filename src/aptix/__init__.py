"""Aptix: a governed runtime for LLM agent tools.

The public API is re-exported here; everything else is an implementation detail. Names are
imported on first use so that ``aptix --help`` does not pay for pydantic and SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    __version__: str

    from aptix.errors import (
        AptixError,
        ConfigurationError,
        LlmError,
        NotFoundError,
        PluginLoadError,
        ToolContractError,
        ToolError,
        TurnError,
    )
    from aptix.llm.types import LlmClient
    from aptix.logger import AdminLogger, LogLevel, StdlibAdminLogger
    from aptix.modes.catalog import ModeCatalog
    from aptix.modes.models import ModeDefinition
    from aptix.reasoner.loop import AgentReasoner
    from aptix.reasoner.result import ToolResultInput, TurnResult
    from aptix.reasoner.turns import TurnStore
    from aptix.results import ErrorMessage, InvokeResult
    from aptix.sessions.manager import SessionManager
    from aptix.sessions.models import AgentSession
    from aptix.tools.args import ToolArgs, ToolResult, function_schema, parse_arguments
    from aptix.tools.base import AgentTool
    from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
    from aptix.tools.decorator import tool
    from aptix.tools.executor import AgentToolExecutor
    from aptix.tools.registry import AgentToolRegistry
    from aptix.workflows.manifest import WorkflowManifest
    from aptix.workflows.registry import WorkflowRegistry
    from aptix.workflows.store import WorkflowStore

_EXPORTS = {
    "AdminLogger": "aptix.logger",
    "AgentReasoner": "aptix.reasoner.loop",
    "AgentSession": "aptix.sessions.models",
    "AgentTool": "aptix.tools.base",
    "AgentToolCall": "aptix.tools.context",
    "AgentToolExecutionContext": "aptix.tools.context",
    "AgentToolExecutor": "aptix.tools.executor",
    "AgentToolRegistry": "aptix.tools.registry",
    "AptixError": "aptix.errors",
    "ConfigurationError": "aptix.errors",
    "ErrorMessage": "aptix.results",
    "InvokeResult": "aptix.results",
    "LlmClient": "aptix.llm.types",
    "LlmError": "aptix.errors",
    "LogLevel": "aptix.logger",
    "ModeCatalog": "aptix.modes.catalog",
    "ModeDefinition": "aptix.modes.models",
    "NotFoundError": "aptix.errors",
    "PluginLoadError": "aptix.errors",
    "SessionManager": "aptix.sessions.manager",
    "StdlibAdminLogger": "aptix.logger",
    "ToolArgs": "aptix.tools.args",
    "ToolContractError": "aptix.errors",
    "ToolError": "aptix.errors",
    "ToolResult": "aptix.tools.args",
    "ToolResultInput": "aptix.reasoner.result",
    "TurnError": "aptix.errors",
    "TurnResult": "aptix.reasoner.result",
    "TurnStore": "aptix.reasoner.turns",
    "WorkflowManifest": "aptix.workflows.manifest",
    "WorkflowRegistry": "aptix.workflows.registry",
    "WorkflowStore": "aptix.workflows.store",
    "function_schema": "aptix.tools.args",
    "parse_arguments": "aptix.tools.args",
    "tool": "aptix.tools.decorator",
}

__all__ = [
    "AdminLogger",
    "AgentReasoner",
    "AgentSession",
    "AgentTool",
    "AgentToolCall",
    "AgentToolExecutionContext",
    "AgentToolExecutor",
    "AgentToolRegistry",
    "AptixError",
    "ConfigurationError",
    "ErrorMessage",
    "InvokeResult",
    "LlmClient",
    "LlmError",
    "LogLevel",
    "ModeCatalog",
    "ModeDefinition",
    "NotFoundError",
    "PluginLoadError",
    "SessionManager",
    "StdlibAdminLogger",
    "ToolArgs",
    "ToolContractError",
    "ToolError",
    "ToolResult",
    "ToolResultInput",
    "TurnError",
    "TurnResult",
    "TurnStore",
    "WorkflowManifest",
    "WorkflowRegistry",
    "WorkflowStore",
    "__version__",
    "function_schema",
    "parse_arguments",
    "tool",
]


def _version() -> str:
    # Read on first use: importlib.metadata is most of what importing aptix costs, and the
    # ``aptix`` script could not catch a Ctrl-C before its own code runs.
    import importlib.metadata

    try:  # pyproject.toml is the one place the version is written
        return importlib.metadata.version("aptix")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = version = _version()
        return version
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aptix' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
