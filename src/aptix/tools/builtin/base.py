"""``BuiltinTool``: the typed base of the tools that ship with Aptix (TUL-011 §3).

A built-in tool names its argument and result models in its base,
``class HelloWorldTool(BuiltinTool[_Args, _Result])``, keeps its explicit ``TOOL_NAME``,
``TOOL_USAGE_METADATA`` and ``schema()``, and writes only ``run(args, context)``. The base
parses and validates ``arguments_json`` into the argument model, calls ``run``, and
serialises what it returns; bad arguments and refusals are failed results with readable
messages, and an unexpected exception is logged as ``[<TOOL_NAME>_ExecuteAsync__Exception]``
and becomes a generic failure.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar, get_args, get_origin

from pydantic import Field

from aptix.db.outage import database_error_code
from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.args import (
    ToolArgs,
    ToolResult,
    function_schema,
    parse_arguments,
)
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolExecutionContext
from aptix.tools.executor import GENERIC_FAILURE

__all__ = [
    "BuiltinTool",
    "CallResult",
    "LogPairs",
    "OperationArgs",
    "Payload",
    "Refusal",
    "compact_json",
    "hints",
    "operation_field",
    "operation_refusal",
    "too_long",
]

ArgsT = TypeVar("ArgsT", bound=ToolArgs)
ResultT = TypeVar("ResultT", bound=ToolResult | Mapping[str, Any])

LogPairs = tuple[tuple[str, str], ...]

#: A failed result: what ``run`` returns to refuse a call.
Refusal = InvokeResult[Any]

#: A JSON object to return, or a refusal saying why there is none.
Payload = dict[str, Any] | Refusal


class CallResult(ToolResult):
    """A result that names the conversation and session of its call (TUL-011 §3).

    ``BuiltinTool`` fills both from the execution context; ``run`` leaves them out.
    """

    conversation_id: str | None = None
    session_id: str | None = None


class OperationArgs(ToolArgs):
    """The arguments of a tool with several operations, named by ``operation``."""

    operation: str = Field("", description="The operation to run.")


class BuiltinTool(AgentTool, Generic[ArgsT, ResultT]):
    """Parses the arguments into ``ArgsT``, calls ``run`` and serialises its ``ResultT``.

    ``run`` returns the result (a ``ToolResult`` as camelCase JSON, a mapping as compact
    JSON) or a failed ``InvokeResult`` for an expected refusal.
    """

    #: The message of an unexpected exception; None means the executor's generic one.
    FAILURE: ClassVar[str | None] = None
    #: False: a database outage or refusal (a missing ``GRANT``) is not the tool's failure
    #: and passes on to the surface, which answers "database unavailable" or "database
    #: refused" (503 over HTTP) and logs it once.
    OUTAGE_IS_A_FAILURE: ClassVar[bool] = False

    _args_model: ClassVar[type[ToolArgs]]

    def __init__(self, logger: AdminLogger) -> None:
        # TUL-011 §2: the logger is injected, and a tool without one could not log a failure.
        if logger is None:
            raise TypeError(f"{type(self).__name__} requires a logger, not None.")
        self._logger = logger

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is BuiltinTool:
                cls._args_model = get_args(base)[0]

    @classmethod
    def function_schema(cls, description: str, *, required: tuple[str, ...] = ()) -> dict[str, Any]:
        """The TUL-011 §4 schema of ``TOOL_NAME`` with this tool's argument model."""
        return function_schema(cls.TOOL_NAME, description, cls._args_model, required=required)

    @abstractmethod
    async def run(self, args: ArgsT, context: AgentToolExecutionContext) -> ResultT | Refusal:
        """Do the tool's work on validated arguments."""

    def invalid(self, message: str) -> InvokeResult[str]:
        """The result for arguments that do not parse (a failed result by default)."""
        return InvokeResult.from_error(message)

    def log_pairs(self, args: ArgsT) -> LogPairs:
        """Extra pairs for the exception log record, beside the context's ids."""
        if isinstance(args, OperationArgs):
            return (("Operation", args.operation.strip()),)
        return ()

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Parse, run and serialise; expected failures are returned, never raised."""
        parsed = parse_arguments(self._args_model, arguments_json)
        if parsed.result is None:
            return self.invalid(parsed.error_message or "Invalid arguments.")
        args: Any = parsed.result
        try:
            outcome = await self.run(args, context)
        except Exception as exc:
            if not self.OUTAGE_IS_A_FAILURE and database_error_code(exc) is not None:
                raise
            self._logger.add_exception(
                f"[{self.TOOL_NAME}_ExecuteAsync__Exception]",
                exc,
                *context.log_pairs(),
                *self.log_pairs(args),
            )
            return InvokeResult.from_error(
                self.FAILURE or GENERIC_FAILURE.format(name=self.TOOL_NAME)
            )
        if isinstance(outcome, InvokeResult):
            return InvokeResult(errors=outcome.errors)
        if isinstance(outcome, CallResult):
            ids = {"conversation_id": context.conversation_id, "session_id": context.session_id}
            outcome = outcome.model_copy(update=ids)
        if isinstance(outcome, ToolResult):
            return InvokeResult.create(outcome.to_json())
        return InvokeResult.create(compact_json(outcome))


def compact_json(payload: Mapping[str, Any]) -> str:
    """``payload`` as JSON without spaces, non-ASCII text kept as it is."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def hints(
    title: str,
    *,
    read_only: bool,
    destructive: bool | None = None,
    idempotent: bool | None = None,
) -> dict[str, Any]:
    """MCP tool annotations for a built-in tool; none of them reaches the open world."""
    found = {
        "title": title,
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": False,
    }
    return {key: value for key, value in found.items() if value is not None}


def too_long(what: str, text: str, limit: int) -> str | None:
    """Why ``text`` is longer than ``limit`` characters, or None when it is not."""
    if len(text) <= limit:
        return None
    return f"{what} is too long ({len(text)} characters; the limit is {limit})."


def operation_field(operations: tuple[str, ...], description: str) -> Any:
    """The ``operation`` argument: a string the schema limits to ``operations``."""
    return Field("", description=description, json_schema_extra={"enum": list(operations)})


def operation_refusal(operation: str, operations: tuple[str, ...]) -> str | None:
    """Why ``operation`` is not one of ``operations``, or None when it is."""
    if not operation:
        return f"Missing 'operation'. Use one of: {', '.join(operations)}."
    if operation not in operations:
        return f"Unknown operation '{operation}'. Use one of: {', '.join(operations)}."
    return None
