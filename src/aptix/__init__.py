"""Aptix: a governed runtime for LLM agent tools.

The public API is re-exported here; everything else is an implementation detail. Names are
imported on first use so that ``aptix --help`` does not pay for pydantic and SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aptix.errors import (
        AptixError,
        ConfigurationError,
        NotFoundError,
        PluginLoadError,
        ToolContractError,
    )
    from aptix.logger import AdminLogger, LogLevel, StdlibAdminLogger
    from aptix.results import ErrorMessage, InvokeResult
    from aptix.tools.args import ToolArgs, ToolResult, function_schema, parse_arguments
    from aptix.tools.base import AgentTool
    from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
    from aptix.tools.executor import AgentToolExecutor
    from aptix.tools.registry import AgentToolRegistry
    from aptix.workflows.manifest import WorkflowManifest
    from aptix.workflows.registry import WorkflowRegistry
    from aptix.workflows.store import WorkflowStore

__version__ = "0.1.0"

_EXPORTS = {
    "AdminLogger": "aptix.logger",
    "AgentTool": "aptix.tools.base",
    "AgentToolCall": "aptix.tools.context",
    "AgentToolExecutionContext": "aptix.tools.context",
    "AgentToolExecutor": "aptix.tools.executor",
    "AgentToolRegistry": "aptix.tools.registry",
    "AptixError": "aptix.errors",
    "ConfigurationError": "aptix.errors",
    "ErrorMessage": "aptix.results",
    "InvokeResult": "aptix.results",
    "LogLevel": "aptix.logger",
    "NotFoundError": "aptix.errors",
    "PluginLoadError": "aptix.errors",
    "StdlibAdminLogger": "aptix.logger",
    "ToolArgs": "aptix.tools.args",
    "ToolContractError": "aptix.errors",
    "ToolResult": "aptix.tools.args",
    "WorkflowManifest": "aptix.workflows.manifest",
    "WorkflowRegistry": "aptix.workflows.registry",
    "WorkflowStore": "aptix.workflows.store",
    "function_schema": "aptix.tools.args",
    "parse_arguments": "aptix.tools.args",
}

__all__ = [
    "AdminLogger",
    "AgentTool",
    "AgentToolCall",
    "AgentToolExecutionContext",
    "AgentToolExecutor",
    "AgentToolRegistry",
    "AptixError",
    "ConfigurationError",
    "ErrorMessage",
    "InvokeResult",
    "LogLevel",
    "NotFoundError",
    "PluginLoadError",
    "StdlibAdminLogger",
    "ToolArgs",
    "ToolContractError",
    "ToolResult",
    "WorkflowManifest",
    "WorkflowRegistry",
    "WorkflowStore",
    "__version__",
    "function_schema",
    "parse_arguments",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aptix' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
