"""Aptix: a governed runtime for LLM agent tools.

The public API is re-exported here; everything else is an implementation detail.
"""

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
