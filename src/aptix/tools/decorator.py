"""``@aptix.tool``: a typed function becomes a compliant ``AgentTool`` class (DESIGN §9).

Decorate an ``async def`` whose docstring describes each argument under ``Args:``; the
result is a class, registered like any other (``registry.register(weather_forecast)``).
See docs/writing-a-tool.md.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable
from typing import Any, ClassVar, overload

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from aptix.errors import ToolContractError, ToolError
from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.args import parse_arguments
from aptix.tools.base import AgentTool
from aptix.tools.bulkhead import BULKHEADS, BulkheadFullError
from aptix.tools.context import AgentToolExecutionContext
from aptix.tools.executor import GENERIC_FAILURE
from aptix.tools.signature import FunctionSignature, read_signature

__all__ = ["FunctionTool", "ToolError", "tool"]

ToolFunction = Callable[..., Any]


class FunctionTool(AgentTool):
    """Base of the classes ``@aptix.tool`` makes; one subclass per function."""

    function: ClassVar[ToolFunction]
    signature: ClassVar[FunctionSignature]
    #: True for a plain (sync) function: it runs in a worker thread that a time limit
    #: cannot stop, so a timed-out call is reported ``abandoned``.
    runs_in_thread: ClassVar[bool] = False

    def __init__(self, logger: AdminLogger) -> None:
        self._logger = logger
        sig = self.signature
        self._args_model = sig.args_model
        self._fields = sig.fields
        self._context_param = sig.context_param
        self._returns = sig.returns
        self._is_async = inspect.iscoroutinefunction(self.function)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema built from the type hints and docstring."""
        sig = cls.signature
        return {
            "type": "function",
            "name": cls.TOOL_NAME,
            "description": sig.description,
            "parameters": {
                "type": "object",
                "properties": {k: dict(v) for k, v in sig.parameters["properties"].items()},
                "required": list(sig.parameters["required"]),
            },
        }

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Validate the arguments, call the function and serialize what it returns."""
        parsed = parse_arguments(self._args_model, arguments_json)
        if parsed.result is None:
            return InvokeResult(errors=parsed.errors)
        args = parsed.result
        kwargs = {name: getattr(args, name) for name in self._fields}
        if self._context_param is not None:
            kwargs[self._context_param] = context
        try:
            if self._is_async:
                value = await self.function(**kwargs)
            else:
                value = await BULKHEADS.run(context.org, self.function, **kwargs)
            return InvokeResult.create(_json_text(value, self._returns))
        except ToolError as exc:
            # A blank message goes through as it is: the executor's contract check logs it
            # and says the tool failed without saying why, as for a class tool.
            return InvokeResult.from_error(str(exc))
        except BulkheadFullError as exc:
            return InvokeResult.from_error(str(exc))
        except Exception as exc:
            self._logger.add_exception(
                f"[{self.TOOL_NAME}_ExecuteAsync__Exception]", exc, *context.log_pairs()
            )
            return InvokeResult.from_error(GENERIC_FAILURE.format(name=self.TOOL_NAME))


def _json_text(value: Any, returns: TypeAdapter[Any] | None) -> str:
    """``value`` as JSON text, through the return annotation when there is one.

    A value that does not fit the annotation raises ``ValidationError`` (the tool broke its
    own advertised ``outputSchema``). Infinity and NaN, which JSON lacks, become ``null``
    where the annotation allows it; where it promises a number they raise ``ValueError``,
    since ``null`` there would break that ``outputSchema`` too.
    """
    try:
        if returns is None:
            return pydantic_core.to_json(value, by_alias=True, inf_nan_mode="null").decode()
        value = returns.validate_python(value)
        text = returns.dump_json(value, by_alias=True).decode()
        # Only a null can stand for a non-finite float: most results skip the walk.
        found = "null" in text and _non_finite(
            returns.dump_python(value, mode="json", by_alias=True)
        )
        if found:
            try:
                returns.validate_json(text)
            except ValidationError:
                raise ValueError(
                    f"the result holds {found[1]} at {found[0] or 'its top level'}, which JSON "
                    "cannot carry and the return annotation does not allow as null"
                ) from None
        return text
    except pydantic_core.PydanticSerializationError:
        # UTF-8 cannot hold a lone surrogate: written as text here, the executor then puts
        # U+FFFD in its place, as for any tool's text. Anything else fails here again.
        adapter = returns or _ANY
        data = adapter.dump_python(value, mode="json", by_alias=True)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


_ANY: TypeAdapter[Any] = TypeAdapter(Any)


def _non_finite(data: Any, path: str = "") -> tuple[str, float] | None:
    """The first Infinity or NaN in JSON-shaped ``data``, as (its path, the value), or None."""
    if isinstance(data, float):
        return None if math.isfinite(data) else (path, data)
    if isinstance(data, dict):
        items: Any = ((f"{path}.{key}" if path else str(key), item) for key, item in data.items())
    elif isinstance(data, list):
        items = ((f"{path}[{i}]", item) for i, item in enumerate(data))
    else:
        return None
    for where, item in items:
        if (found := _non_finite(item, where)) is not None:
            return found
    return None


@overload
def tool(fn: ToolFunction, /) -> type[FunctionTool]: ...


@overload
def tool(
    *,
    usage: str,
    name: str | None = None,
    server_final: bool = True,
    title: str | None = None,
    annotations: dict[str, Any] | None = None,
    idempotent: bool = False,
) -> Callable[[ToolFunction], type[FunctionTool]]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    usage: str | None = None,
    name: str | None = None,
    server_final: bool = True,
    title: str | None = None,
    annotations: dict[str, Any] | None = None,
    idempotent: bool = False,
) -> type[FunctionTool] | Callable[[ToolFunction], type[FunctionTool]]:
    """Turn a typed function with a docstring into an ``AgentTool`` class.

    ``usage`` (required) is the ``TOOL_USAGE_METADATA``: when the model should call the
    tool. ``name`` defaults to the function's name; ``server_final=False`` makes a
    client-final tool; ``title`` and ``annotations`` (``readOnlyHint``, ``destructiveHint``,
    ...) are shown to MCP clients. ``idempotent=True`` (the ``idempotentHint`` annotation)
    says running a call twice does no more than running it once: a call interrupted by a
    crash is then run again instead of being reported ``unknown``. Raises
    :class:`ToolContractError` naming the function when it cannot be a tool.
    """
    if fn is not None:
        raise ToolContractError(
            f"@aptix.tool on {fn.__module__}.{fn.__qualname__} needs usage=...: write "
            "@aptix.tool(usage='When the model should call this tool.')."
        )

    def decorate(function: ToolFunction) -> type[FunctionTool]:
        hints = {**(annotations or {}), **({"idempotentHint": True} if idempotent else {})}
        return _make_tool_class(function, name, usage, server_final, title, hints or None)

    return decorate


def _make_tool_class(
    fn: ToolFunction,
    name: str | None,
    usage: str | None,
    server_final: bool,
    title: str | None,
    annotations: dict[str, Any] | None,
) -> type[FunctionTool]:
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    who = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    if not callable(fn):
        raise ToolContractError(f"@aptix.tool needs a function, not {type(fn).__name__}.")
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        # Its items would be produced outside the time limit (or not at all): one answer.
        raise ToolContractError(
            f"Tool {tool_name!r} ({who}) is a generator function; a tool returns one result: "
            "return a list of the items instead."
        )
    if not isinstance(usage, str) or not usage.strip():
        raise ToolContractError(f"Tool {tool_name!r} ({who}): usage must be a non-empty str.")
    try:
        sig = read_signature(fn, tool_name)
    except ValueError as exc:
        raise ToolContractError(str(exc)) from exc
    hints = dict(annotations or {})
    if title:
        hints["title"] = title
    class_name = "".join(p.capitalize() for p in re.split(r"[^a-zA-Z0-9]+", tool_name)) + "Tool"
    namespace: dict[str, Any] = {
        "TOOL_NAME": tool_name,
        "TOOL_USAGE_METADATA": usage,
        "is_fully_executed_on_server": server_final,
        "TOOL_ANNOTATIONS": hints or None,
        "TOOL_OUTPUT_SCHEMA": sig.output_schema,
        "function": staticmethod(fn),
        "runs_in_thread": not inspect.iscoroutinefunction(fn),
        "signature": sig,
        "__module__": fn.__module__,
        "__qualname__": class_name,
        "__doc__": sig.description.splitlines()[0],
        "__wrapped__": fn,
    }
    return type(class_name, (FunctionTool,), namespace)
