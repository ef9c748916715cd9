"""Tool arguments as private pydantic models, and the TUL-011 §4 schema built from them."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import AliasGenerator, BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from aptix.casing import any_case
from aptix.results import InvokeResult
from aptix.tools.argument_keys import DocumentedKeys, FieldGivenTwice, reading_schema

__all__ = ["ToolArgs", "ToolResult", "function_schema", "parse_arguments"]

SIMPLE_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array"})

A = TypeVar("A", bound="ToolArgs")

#: The error type of a field given in two spellings (its message says everything).
GIVEN_TWICE = "field_given_twice"


class ToolArgs(BaseModel):
    """Base of every tool's private argument model: camelCase, PascalCase or snake_case keys."""

    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=any_case, alias=to_camel),
        populate_by_name=True,
        extra="ignore",
        frozen=True,
        # JSON has no NaN or infinity, but Python reads 1e999 as one (and MCP's reader NaN):
        # a tool would get a number it cannot write back.
        allow_inf_nan=False,
    )

    @model_validator(mode="before")
    @classmethod
    def _read_keys(cls, data: Any) -> Any:
        # Every key, at every level, is matched to the field it spells here, so that each
        # tool, class or function, reads the same text alike and refuses a field given twice.
        try:
            return _argument_keys(cls).match(data)
        except FieldGivenTwice as exc:
            raise PydanticCustomError(GIVEN_TWICE, "{reason}", {"reason": str(exc)}) from None


@functools.cache
def _argument_keys(model: type[BaseModel]) -> DocumentedKeys:
    """How ``model``'s argument keys are read, worked out on its first call only."""
    return DocumentedKeys(reading_schema(model))


class ToolResult(BaseModel):
    """Base of every tool's result payload: serialized as camelCase JSON."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    def to_json(self) -> str:
        """Serialize with camelCase keys."""
        return self.model_dump_json(by_alias=True)


def parse_arguments(model: type[A], arguments_json: str | None) -> InvokeResult[A]:
    """Parse ``arguments_json`` into ``model``; blank input means ``{}``; errors become messages."""
    text = arguments_json if arguments_json and not arguments_json.isspace() else "{}"
    try:
        parsed = model.model_validate_json(text)
    except ValidationError as exc:
        return InvokeResult.from_error(describe_validation_error(exc, text))
    if (found := _not_finite(parsed)) is not None:
        where = _as_sent(found, _sent(text))
        return InvokeResult.from_error(f"Invalid arguments: '{where}': {NOT_FINITE}.")
    return InvokeResult.create(parsed)


#: What a number JSON cannot write back is told, in pydantic's words for a ``ToolArgs`` field.
NOT_FINITE = "input should be a finite number"


def _not_finite(arguments: BaseModel) -> tuple[int | str, ...] | None:
    """The place of the first number the tool gets in ``arguments`` that is not finite.

    ``ToolArgs`` refuses NaN and infinity (Python reads ``1e999`` as one) in its own fields,
    but a model, dict or ``Any`` nested in them keeps pydantic's default and takes it: the
    tool could not write it back. What the tool gets is walked, not the text (a key it
    ignores is no matter), without recursion, however deep it nests. A field that was never
    set (a dataclass's ``init=False``) holds nothing the tool could read, and an object
    reached twice (a parent link set after validation) is walked once: the walk ends and
    stays linear.
    """
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(arguments, ())]
    seen = {id(arguments)}
    while stack:
        item, place = stack.pop()
        parts: Iterable[tuple[Any, Any]]
        if isinstance(item, BaseModel):
            parts = [(name, getattr(item, name, None)) for name in type(item).model_fields]
            parts += list((item.model_extra or {}).items())
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            fields = dataclasses.fields(item)
            parts = [(field.name, getattr(item, field.name, None)) for field in fields]
        elif isinstance(item, dict):
            parts = item.items()
        else:  # a list, tuple or set
            parts = enumerate(item)
        for key, value in parts:
            # Numbers are checked here, only what holds more goes on the stack: a list of
            # many numbers costs no more than reading them.
            if isinstance(value, float):
                if not math.isfinite(value):
                    return (*place, key if isinstance(key, int) else str(key))
            elif type(value) in _PLAIN:
                continue
            elif (
                isinstance(value, _HOLDERS)
                or (dataclasses.is_dataclass(value) and not isinstance(value, type))
            ) and id(value) not in seen:
                seen.add(id(value))
                stack.append((value, (*place, key if isinstance(key, int) else str(key))))
    return None


#: What may hold a number, besides a dataclass.
_HOLDERS = (BaseModel, dict, list, tuple, set, frozenset)

#: What JSON gives most often and holds nothing to check: passed over at once.
_PLAIN = frozenset({str, int, bool, type(None)})


def _as_sent(place: tuple[int | str, ...], sent: Any) -> str:
    """``place``, dotted, each field named by its key in the arguments ``sent``."""
    parts: list[str] = []
    node = sent
    for part in place:
        if isinstance(node, dict) and isinstance(part, str) and (key := _key(node, part)):
            node, part = node[key], key
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = _UNKNOWN
        parts.append(str(part))
    return ".".join(parts)


def describe_validation_error(exc: ValidationError, arguments_json: str | None = None) -> str:
    """Turn a pydantic error into one sentence a model or a person can act on.

    With the ``arguments_json`` that failed, a field's path names only what was sent: the
    members of a union (``Cat``, ``int``) that pydantic puts in it are left out, and what
    each member wanted is said once for the field, joined by "or".
    """
    sent = _sent(arguments_json)
    problems: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False):
        kind = err["type"]
        if kind == GIVEN_TWICE:
            return str(err["msg"])
        if kind == "json_invalid":
            detail = err["msg"].removeprefix("Invalid JSON: ")
            return f"Arguments must be a valid JSON object ({detail})."
        where = ".".join(_path(err["loc"], sent, missing=kind == "missing"))
        if not err["loc"]:  # only an error at the root means the arguments are not an object
            return "Arguments must be a JSON object."
        said = problems.setdefault(where, [])
        message = _field_message(kind, err["msg"])
        if message not in said:
            said.append(message)
    return (
        "Invalid arguments: "
        + "; ".join(f"'{where}': {' or '.join(said)}" for where, said in problems.items())
        + "."
    )


_UNKNOWN = object()


def _sent(arguments_json: str | None) -> Any:
    if arguments_json is None:
        return _UNKNOWN
    try:
        return json.loads(arguments_json)
    except (ValueError, RecursionError):
        return _UNKNOWN


def _path(loc: tuple[int | str, ...], sent: Any, *, missing: bool) -> list[str]:
    """The parts of ``loc`` that are keys and indexes of what was sent."""
    if sent is _UNKNOWN:
        return [str(part) for part in loc]
    parts: list[str] = []
    node = sent
    for index, part in enumerate(loc):
        if isinstance(node, dict) and isinstance(part, str) and (key := _key(node, part)):
            node = node[key]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif not (missing and index == len(loc) - 1):  # else: the field that was not sent
            continue  # a union member's name: no part of the arguments
        parts.append(str(part))
    return parts


def _key(node: dict[Any, Any], part: str) -> str | None:
    """The key of ``node`` that ``part`` names, in any of the casings arguments accept."""
    if part in node:
        return part
    wanted = part.replace("_", "").casefold()
    return next(
        (k for k in node if isinstance(k, str) and k.replace("_", "").casefold() == wanted), None
    )


def _field_message(kind: str, msg: str) -> str:
    """Pydantic's message for one field, in JSON terms, starting in lower case."""
    if kind in _OBJECT_EXPECTED:
        # Pydantic says "a valid dictionary or instance of Address": Python words for JSON.
        return "input should be a JSON object"
    if kind == "bool_type":
        # What a strict flag takes, in JSON's words: "a valid boolean" leaves "yes" open.
        return "input should be true or false"
    # Only the first letter: a pattern or an allowed value quoted later keeps its case.
    return msg[:1].lower() + msg[1:]


_OBJECT_EXPECTED = frozenset({"model_type", "model_attributes_type", "dict_type"})


def function_schema(
    name: str,
    description: str,
    args_model: type[ToolArgs],
    *,
    required: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Return the flat function-tool schema for ``args_model`` (a fresh copy each call).

    ``required`` names properties the model must send even though the argument model keeps
    them optional, so that the tool, not pydantic, words the error (TUL-007 §3.4).
    """
    return copy.deepcopy(_cached_schema(name, description, args_model, required))


@functools.cache
def _cached_schema(
    name: str, description: str, args_model: type[ToolArgs], required: tuple[str, ...]
) -> dict[str, Any]:
    raw = args_model.model_json_schema(by_alias=True, mode="validation")
    properties: dict[str, Any] = {}
    must: list[str] = []
    for field_name, info in args_model.model_fields.items():
        alias = to_camel(field_name)
        prop = _simplify(raw["properties"].get(alias, {}), raw)
        if not info.description:
            raise ValueError(f"{args_model.__name__}.{field_name} needs a description")
        prop["description"] = info.description
        properties[alias] = prop
        if info.is_required() or field_name in required or alias in required:
            must.append(alias)
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": must},
    }


def _simplify(prop: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Collapse ``Optional[X]`` and ``$ref`` into one simple JSON type."""
    if "$ref" in prop:
        prop = root["$defs"][prop["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in prop:
        options = [p for p in prop["anyOf"] if p.get("type") != "null"]
        prop = options[0] if len(options) == 1 else {"type": "string"}
    if "const" in prop:
        prop = {"type": "string", "enum": [prop["const"]]}
    out: dict[str, Any] = {"type": prop.get("type", "string")}
    if out["type"] not in SIMPLE_TYPES:
        out["type"] = "string"
    for key in ("enum", "minimum", "maximum"):
        if key in prop:
            out[key] = prop[key]
    if out["type"] == "array":
        out["items"] = _simplify(prop.get("items", {"type": "string"}), root)
        out["items"].pop("description", None)
    return out
