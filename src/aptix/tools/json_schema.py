"""Normalise a JSON schema into the subset OpenAI-style function tools accept.

Pydantic and MCP servers produce full JSON Schema: ``$ref``/``$defs``, ``oneOf``,
``const``, ``prefixItems``, titles everywhere. Model APIs take a smaller language, so
references are inlined, ``oneOf`` becomes ``anyOf``, ``const`` becomes a one-value ``enum``
and keywords outside the accepted set are dropped. Constraints, formats, enums, defaults and
descriptions are kept. A schema that cannot be expressed (a recursive reference) raises
:class:`SchemaError` with a message naming where.

References are inlined here rather than with ``jsonref`` (issue 23 weighed it): these schemas
come from MCP servers, which are outside input, and ``jsonref``'s default loader fetches any
``http(s)://`` or ``file://`` reference it meets; a recursive type becomes a cyclic structure
that this walk would still have to detect by identity to refuse it; and the inlining is a
dozen lines of a walk that visits every node for the keyword mapping anyway. Only local
``#/$defs/...`` and ``#/definitions/...`` references are followed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SCHEMA_KEYWORDS", "SchemaError", "normalize_object_schema", "normalize_schema"]

#: Keywords kept on a (sub)schema; everything else is dropped.
SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "enum",
        "default",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
    }
)

_MAX_DEPTH = 32


class SchemaError(ValueError):
    """A JSON schema that cannot be turned into a function-tool schema."""


def normalize_object_schema(schema: Any) -> dict[str, Any]:
    """Normalise the ``parameters`` schema of a tool: always an object with properties."""
    if not isinstance(schema, dict):
        raise SchemaError(f"the input schema must be an object, not {type(schema).__name__}")
    out = normalize_schema(schema)
    if out.get("type", "object") != "object":
        raise SchemaError(f"the input schema must have type 'object', not {out.get('type')!r}")
    out["type"] = "object"
    out.setdefault("properties", {})
    props = out["properties"]
    out["required"] = [r for r in out.get("required", []) if r in props]
    return out


def normalize_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return a normalised copy of ``schema`` (the input is never changed)."""
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    return _normalize(schema, defs, (), 0)


def _normalize(
    node: Any, defs: dict[str, Any], seen: tuple[str, ...], depth: int
) -> dict[str, Any]:
    if not isinstance(node, dict):
        return {}  # `true` or garbage: any value
    if depth > _MAX_DEPTH:
        raise SchemaError(f"the schema nests deeper than {_MAX_DEPTH} levels")
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            raise SchemaError(f"the schema refers to itself through '{name}' (recursive types)")
        if name not in defs:
            raise SchemaError(f"the schema refers to '{ref}', which it does not define")
        target = _normalize(defs[name], defs, (*seen, name), depth + 1)
        # Keywords beside the reference (a field's description or default) win.
        beside = _normalize({k: v for k, v in node.items() if k != "$ref"}, defs, seen, depth)
        return {**target, **beside}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "const":
            out["enum"] = [value]
        elif key in ("oneOf", "anyOf"):
            out["anyOf"] = [_normalize(v, defs, seen, depth + 1) for v in value or []]
        elif key == "allOf" and isinstance(value, list) and len(value) == 1:
            out.update(_normalize(value[0], defs, seen, depth + 1))
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {
                str(k): _normalize(v, defs, seen, depth + 1) for k, v in value.items()
            }
        elif key == "items" and isinstance(value, dict):
            out["items"] = _normalize(value, defs, seen, depth + 1)
        elif key == "prefixItems" and isinstance(value, list):
            # Tuples: model APIs take no positional items, so any listed type is allowed.
            options = [_normalize(v, defs, seen, depth + 1) for v in value]
            out.setdefault("items", options[0] if len(options) == 1 else {"anyOf": options})
        elif key == "additionalProperties" and isinstance(value, dict):
            out[key] = _normalize(value, defs, seen, depth + 1)
        elif key in SCHEMA_KEYWORDS:
            out[key] = value
    if "enum" in out and "type" not in out:
        kinds = {_json_type(v) for v in out["enum"]}
        if len(kinds) == 1:
            out["type"] = kinds.pop()
    if "anyOf" in out and len(out["anyOf"]) == 1:
        only = out.pop("anyOf")[0]
        out = {**only, **out}
    return out


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    return "string"
