"""Answers in a ``response_format``: whether a strict JSON schema applies, and is met.

A client asking for ``{"type": "json_schema", "json_schema": {..., "strict": true}}`` relies on
the answer being JSON that matches the schema. The model endpoint is asked to guarantee it,
but not every OpenAI-compatible endpoint does, and a capped or cut answer is not JSON: the
final answer is checked, so a client is told rather than handed text its parser fails on.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import SchemaError
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

__all__ = ["FORMAT_UNMET", "answer_problem", "schema_problem", "strict_schema"]

#: The error code of a turn whose final answer does not meet its strict ``response_format``.
FORMAT_UNMET = "response_format_unmet"

#: The longest part of a parser's or validator's message quoted in a problem.
_QUOTED = 300


def strict_schema(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``json_schema`` part of a strict JSON schema format; None for any other format."""
    if response_format is None or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    return spec if isinstance(spec, dict) and spec.get("strict") is True else None


def schema_problem(response_format: dict[str, Any] | None) -> str | None:
    """What makes a strict format's schema unusable (not a JSON Schema); None if usable."""
    spec = strict_schema(response_format)
    schema = None if spec is None else spec.get("schema")
    if schema is None:
        return None
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = exc.json_path if exc.path else "the schema"
        return f"json_schema.schema is not a valid JSON Schema at {where}: {_cut(exc.message)}"
    return None


def answer_problem(response_format: dict[str, Any] | None, text: str | None) -> str | None:
    """Why ``text`` does not meet a strict format (not JSON, or not of its schema); else None."""
    spec = strict_schema(response_format)
    if spec is None:
        return None
    name = spec.get("name") or "json_schema"
    try:
        value = json.loads(text or "")
    except (ValueError, RecursionError) as exc:
        return (
            f"The model's final answer is not JSON ({_cut(str(exc))}), though response_format "
            f"{name!r} is strict."
        )
    schema = spec.get("schema")
    if schema is None:
        return None
    try:
        error = best_match(validator_for(schema)(schema).iter_errors(value))
    except Exception:
        # An unresolvable $ref, which the endpoint accepted: the answer is JSON, which is
        # what can be checked without the schema.
        return None
    if error is None:
        return None
    return (
        f"The model's final answer does not match the schema of response_format {name!r} at "
        f"{error.json_path}: {_cut(error.message)}"
    )


def _cut(text: str) -> str:
    return text if len(text) <= _QUOTED else text[:_QUOTED] + "…"
