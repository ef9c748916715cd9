"""A typed function's parameters as a tool argument model, and its function-tool schema.

The argument model is a pydantic model built from the type hints (``ToolArgs`` casing:
camelCase on the wire, any casing accepted); descriptions come from the docstring's
``Args:`` section (Google, reST or NumPy style) or from ``Annotated[..., Field(...)]``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args, get_type_hints

import docstring_parser
from pydantic import Field, TypeAdapter, create_model
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from aptix.tools.args import ToolArgs
from aptix.tools.context import AgentToolExecutionContext
from aptix.tools.json_schema import SchemaError, normalize_object_schema, normalize_schema

__all__ = ["FunctionSignature", "output_schema_of", "read_signature"]


@dataclass(frozen=True, slots=True)
class FunctionSignature:
    """What a tool needs to know about its function, worked out once at decoration time."""

    description: str
    args_model: type[ToolArgs]
    fields: tuple[str, ...]
    context_param: str | None
    parameters: dict[str, Any]
    output_schema: dict[str, Any] | None
    #: The return annotation, through which results are validated and serialized (None
    #: when there is none, or it is ``Any``, or pydantic cannot handle it).
    returns: TypeAdapter[Any] | None


def read_signature(fn: Callable[..., Any], tool_name: str) -> FunctionSignature:
    """Inspect ``fn``; raise ``ValueError`` naming the tool and parameter when it cannot serve."""
    where = f"Tool {tool_name!r} ({fn.__module__}.{fn.__qualname__})"
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    description = "\n\n".join(
        part for part in (doc.short_description, doc.long_description) if part
    ).strip()
    if not description:
        raise ValueError(f"{where}: the function needs a docstring saying what the tool does.")
    documented = {p.arg_name: (p.description or "").strip() for p in doc.params}
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ValueError(f"{where}: its type hints cannot be resolved ({exc}).") from exc
    context_param: str | None = None
    definitions: dict[str, Any] = {}
    wire_names: dict[str, str] = {}  # camelCase name on the wire -> the parameter
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ValueError(f"{where}: *args and **kwargs cannot be tool arguments.")
        if param.kind is param.POSITIONAL_ONLY:
            raise ValueError(f"{where}: parameter '{name}' is positional-only.")
        hint = hints.get(name)
        if hint is AgentToolExecutionContext or AgentToolExecutionContext in get_args(hint):
            context_param = name
            continue
        if hint is None:
            raise ValueError(f"{where}: parameter '{name}' needs a type hint.")
        if (other := wire_names.setdefault(to_camel(name), name)) != name:
            raise ValueError(
                f"{where}: parameters '{other}' and '{name}' are both '{to_camel(name)}' on the "
                "wire (arguments are camelCase); rename one."
            )
        definitions[name] = (hint, _field(param, documented.get(name)))
    try:
        model = create_model(
            f"{fn.__name__}_args", __base__=ToolArgs, __module__=fn.__module__, **definitions
        )
    except Exception as exc:
        raise ValueError(f"{where}: pydantic cannot build its arguments ({exc}).") from exc
    for name, info in model.model_fields.items():
        if not (info.description or "").strip():
            raise ValueError(
                f"{where}: parameter '{name}' has no description; describe it under 'Args:' "
                "in the docstring or with Annotated[..., Field(description=...)]."
            )
    try:
        parameters = _parameters_schema(model)
    except SchemaError as exc:
        raise ValueError(f"{where}: {exc}.") from exc
    return FunctionSignature(
        description=description,
        args_model=model,
        fields=tuple(model.model_fields),
        context_param=context_param,
        parameters=parameters,
        output_schema=output_schema_of(hints.get("return")),
        returns=_return_adapter(hints.get("return")),
    )


def _return_adapter(hint: Any) -> TypeAdapter[Any] | None:
    if hint is None or hint is Any:
        return None
    try:
        return TypeAdapter(hint)
    except Exception:  # an unusual return type is serialized as it comes
        return None


def _field(param: inspect.Parameter, described: str | None) -> Any:
    default = param.default
    if isinstance(default, FieldInfo):
        if described and not default.description:
            default.description = described
        return default
    value = ... if default is inspect.Parameter.empty else default
    return Field(value, description=described) if described else Field(value)


def _parameters_schema(model: type[ToolArgs]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema = normalize_object_schema(raw)
    properties: dict[str, Any] = schema["properties"]
    for name, info in model.model_fields.items():
        prop = properties[to_camel(name)]
        if not info.is_required():
            _drop_null_option(prop)
        prop["description"] = info.description
    _strip_titles(schema)
    return {
        "type": "object",
        "properties": properties,
        "required": schema["required"],
    }


def _drop_null_option(prop: dict[str, Any]) -> None:
    """``X | None = None`` is offered as an optional ``X``: models handle absence better."""
    options = prop.get("anyOf")
    if not isinstance(options, list):
        return
    rest = [o for o in options if o.get("type") != "null"]
    if len(rest) == len(options):
        return
    del prop["anyOf"]
    if len(rest) == 1:
        for key, value in rest[0].items():
            prop.setdefault(key, value)
    else:
        prop["anyOf"] = rest
    if prop.get("default", 0) is None:
        del prop["default"]


def _strip_titles(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("title", None)
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    _strip_titles(sub)
            elif key not in ("default", "enum"):
                _strip_titles(value)
    elif isinstance(node, list):
        for item in node:
            _strip_titles(item)


def output_schema_of(hint: Any) -> dict[str, Any] | None:
    """The JSON schema of an object-shaped return type (MCP ``outputSchema``), else None."""
    if hint is None or hint is Any or hint is type(None):
        return None
    try:
        raw = TypeAdapter(hint).json_schema(mode="serialization", by_alias=True)
        schema = normalize_schema(raw)
    except Exception:  # an unusual return type only loses its advertised schema
        return None
    if schema.get("type") != "object":
        return None
    _strip_titles(schema)
    return schema
