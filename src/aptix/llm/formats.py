r"""Answers in a ``response_format``: whether a strict JSON schema applies, and is met.

A client asking for ``{"type": "json_schema", "json_schema": {..., "strict": true}}`` relies on
the answer being JSON that matches the schema. The model endpoint is asked to guarantee it,
but not every OpenAI-compatible endpoint does, and a capped or cut answer is not JSON: the
final answer is checked, so a client is told rather than handed text its parser fails on.

The schema is the caller's, so checking with it must cost the server nothing it does not
bound: a ``$ref`` resolves only within the schema itself, including the resources it embeds
by ``$id`` (nothing is ever fetched), a schema nests at most :data:`MAX_SCHEMA_DEPTH` levels,
and the patterns it holds run under the ``regex`` module with a time limit
(:data:`PATTERN_SECONDS` of matching for a whole answer), which also reads the ECMA-262 syntax
JSON Schema specifies (``\p{L}``, ``(?<name>...)``) where Python's ``re`` does not.
"""

from __future__ import annotations

import contextvars
import functools
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urldefrag

import referencing.jsonschema
import regex
from jsonschema import FormatChecker, SchemaError, ValidationError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for
from referencing import Registry, Resource, Specification
from referencing._core import Resolved, Resolver
from referencing.exceptions import Unresolvable

__all__ = [
    "FORMAT_UNMET",
    "MAX_SCHEMA_DEPTH",
    "PATTERN_SECONDS",
    "answer_problem",
    "schema_problem",
    "strict_schema",
]

#: The error code of a turn whose final answer does not meet its strict ``response_format``.
FORMAT_UNMET = "response_format_unmet"

#: The deepest nesting of JSON objects and arrays a strict schema may have (the schema of
#: 31 objects one inside another is 63 deep, ``properties`` and the object at each level);
#: a deeper one would exhaust the validator's recursion.
MAX_SCHEMA_DEPTH = 64

#: How long the patterns of a strict schema may run, in all, checking one answer: a pattern
#: that backtracks without end (``^(a+)+$``) makes the answer unmet, not the server stall.
#: Only matching is charged: the rest of the check is bounded by the answer's size.
PATTERN_SECONDS = 1.0

#: The longest part of a parser's or validator's message quoted in a problem.
_QUOTED = 300

#: The keywords that name another schema by URI; only the schema's own resources resolve.
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")


class _Budget:
    """The matching time left to the patterns checking one answer, in seconds."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = PATTERN_SECONDS


#: The pattern budget of the answer being checked (each check in its own context).
_budget: contextvars.ContextVar[_Budget] = contextvars.ContextVar("aptix_pattern_budget")

#: Nothing is ever retrieved: a reference that is not within the schema stays unresolved.
_NO_RETRIEVAL: Registry[Any] = Registry()


class _TooDeep(ValueError):
    pass


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
        _check_depth(schema)
        cls = validator_for(schema)
        checker = validator_for(cls.META_SCHEMA, default=cls)(
            cls.META_SCHEMA, format_checker=_format_checker(cls)
        )
        error = best_match(checker.iter_errors(schema))
    except (_TooDeep, RecursionError):
        return _too_deep()
    if error is not None:
        exc = SchemaError.create_from(error)
        where = exc.json_path if exc.path else "the schema"
        return f"json_schema.schema is not a valid JSON Schema at {where}: {_cut(exc.message)}"
    # After the meta-schema check: referencing reads every subschema as an object or boolean.
    if (problem := _unbounded(schema, cls)) is not None:
        return problem
    if _loops(schema):
        return (
            "json_schema.schema's $refs refer to one another without end (a $ref loop), so no "
            "answer could be checked against it."
        )
    return None


def answer_problem(response_format: dict[str, Any] | None, text: str | None) -> str | None:
    """Why ``text`` does not meet a strict format (not JSON, or not of its schema); else None.

    Blocking for up to :data:`PATTERN_SECONDS` and more: an async caller runs it in a thread.
    """
    spec = strict_schema(response_format)
    if spec is None:
        return None
    name = spec.get("name") or "json_schema"
    try:
        value = json.loads(text or "", parse_constant=_not_json)
    except (ValueError, RecursionError) as exc:
        return (
            f"The model's final answer is not JSON ({_cut(str(exc))}), though response_format "
            f"{name!r} is strict."
        )
    schema = spec.get("schema")
    if schema is None:
        return None
    token = _budget.set(_Budget())
    try:
        validator = _bounded(validator_for(schema))(schema, registry=_NO_RETRIEVAL)
        error = best_match(validator.iter_errors(value))
    except Unresolvable:
        # A $ref the schema does not hold, which the endpoint accepted: the answer is JSON,
        # which is what can be checked without it.
        return None
    except RecursionError:
        return (
            f"The model's final answer could not be checked against the schema of "
            f"response_format {name!r}: checking recursed too deeply (an answer nested too "
            "deeply, or $refs that refer to one another without end)."
        )
    finally:
        _budget.reset(token)
    if error is None:
        return None
    return (
        f"The model's final answer does not match the schema of response_format {name!r} at "
        f"{error.json_path}: {_cut(error.message)}"
    )


def _check_depth(schema: Any) -> None:
    """Raise :class:`_TooDeep` if ``schema`` nests more than :data:`MAX_SCHEMA_DEPTH` levels."""
    stack = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise _TooDeep
        if isinstance(node, dict):
            stack.extend((item, depth + 1) for item in node.values())
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)


def _unbounded(schema: Any, cls: type[Validator]) -> str | None:
    """What of a valid schema reaches outside it, or past the bounds checking it has; else None.

    Walked as the validator walks it: only subschemas (``x-...`` annotations, ``enum`` and
    ``examples`` are data, their ``$ref`` no reference), each ``$ref`` resolved against its
    enclosing ``$id``s with a registry of the schema's own resources that retrieves nothing.
    """
    # The dialect jsonschema's validator reads the schema in: its meta-schema's id.
    meta = cls.META_SCHEMA
    specification = referencing.jsonschema.specification_with(
        meta.get("$id") or meta.get("id") or "urn:unknown-dialect", default=Specification.OPAQUE
    )
    root = specification.create_resource(schema)
    registry: Registry[Any] = Registry().with_resource(root.id() or "", root).crawl()
    seen: set[int] = set()
    keywords: set[str] = set()
    pending: list[tuple[Resolver[Any], Resource[Any]]] = [(registry.resolver_with_root(root), root)]
    while pending:
        resolver, resource = pending.pop()
        contents = resource.contents
        if not isinstance(contents, dict) or id(contents) in seen:
            continue
        seen.add(id(contents))
        keywords.update(contents)
        for key in _REFS:
            if isinstance(ref := contents.get(key), str):
                # The target too, wherever it is: a $ref into an annotation makes it a schema.
                target = _resolve(resolver, ref)
                if isinstance(target, str):
                    return target
                if target is not None:
                    pending.append(
                        (target.resolver, specification.create_resource(target.contents))
                    )
        pending.extend((resolver.in_subresource(sub), sub) for sub in resource.subresources())
    if {"patternProperties", "unevaluatedProperties"} <= keywords:
        # jsonschema matches patternProperties for unevaluatedProperties with Python's re,
        # which no time limit bounds.
        return (
            "json_schema.schema uses patternProperties with unevaluatedProperties, which a "
            "strict schema cannot combine here; use additionalProperties instead."
        )
    return None


def _resolve(resolver: Resolver[Any], ref: str) -> Resolved[Any] | str | None:
    """Where ``ref`` leads in the schema, why it is refused, or None if it names nothing in it."""
    try:
        resolved = resolver.lookup(ref)
    except Unresolvable:
        try:
            resolver.lookup(urldefrag(ref).url or "#")
        except Unresolvable:
            return (
                f"json_schema.schema refers to {_cut(json.dumps(ref))}, outside the schema: a "
                "strict schema's $ref must name a part of the schema itself ('#', "
                "'#/$defs/...', or a resource it embeds by $id); nothing is fetched from "
                "elsewhere."
            )
        # A pointer or anchor naming nothing in one of the schema's own resources: left
        # unresolved when an answer is checked, as before.
        return None
    except ValueError:
        # referencing reads a pointer's segment into an array as an index ('#/allOf/x').
        return _names_no_schema(ref)
    if not isinstance(resolved.contents, dict | bool):
        return _names_no_schema(ref)
    return resolved


def _names_no_schema(ref: str) -> str:
    return (
        f"json_schema.schema refers to {_cut(json.dumps(ref))}, which names no schema within "
        "it (a $ref must lead to an object or a boolean)."
    )


def _loops(schema: Any) -> bool:
    """Whether checking even ``null`` against ``schema`` recurses without end (a $ref loop)."""
    token = _budget.set(_Budget())
    try:
        validator = _bounded(validator_for(schema))(schema, registry=_NO_RETRIEVAL)
        best_match(validator.iter_errors(None))
    except RecursionError:
        return True
    except Unresolvable:
        return False
    finally:
        _budget.reset(token)
    return False


def _too_deep() -> str:
    return (
        f"json_schema.schema is nested more than {MAX_SCHEMA_DEPTH} levels deep (objects and "
        "arrays), more than a strict schema may be here; use $defs and $ref for deep or "
        "recursive structures."
    )


def _not_json(constant: str) -> Any:
    # NaN, Infinity and -Infinity, which Python's json reads and no JSON parser does.
    raise ValueError(f"{constant} is not a JSON value")


@functools.cache
def _format_checker(cls: type[Validator]) -> FormatChecker:
    """The format checker of ``cls``'s meta-schema, with ECMA-262 patterns read as such."""
    checker = FormatChecker(formats=())
    checker.checkers = {**cls.FORMAT_CHECKER.checkers, "regex": (_is_regex, regex.error)}
    return checker


def _is_regex(instance: object) -> bool:
    return not isinstance(instance, str) or bool(_compiled(instance))


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


@functools.cache
def _bounded(cls: type[Validator]) -> type[Validator]:
    """``cls`` with every keyword that matches a pattern doing so within the budget."""
    bounded: type[Validator] = extend(  # type: ignore[no-untyped-call]  # untyped in the stubs
        cls,
        validators={
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )
    return bounded


class _PatternTimeout(Exception):
    pass


def _search(pattern: str, text: str) -> bool:
    # Charged its own time only: the validator's walk of a large answer is no pattern's.
    budget = _budget.get()
    if budget.left <= 0:
        raise _PatternTimeout
    started = time.monotonic()
    try:
        # concurrent: the match releases the GIL, so the event loop runs beside it.
        found = _compiled(pattern).search(text, concurrent=True, timeout=budget.left)
    except TimeoutError:
        budget.left = 0
        raise _PatternTimeout from None
    budget.left -= time.monotonic() - started
    return found is not None


def _timed_out(pattern: str) -> ValidationError:
    return ValidationError(
        f"the pattern {_cut(json.dumps(pattern))} could not be checked within {PATTERN_SECONDS:g} s"
    )


def _pattern(validator: Any, pattern: str, instance: Any, _: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string"):
        return
    try:
        matched = _search(pattern, instance)
    except _PatternTimeout:
        yield _timed_out(pattern)
        return
    if not matched:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, _: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, item in instance.items():
            try:
                matched = _search(pattern, key)
            except _PatternTimeout:
                yield _timed_out(pattern)
                return
            if matched:
                yield from validator.descend(item, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, extra: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras: list[str] = []
    for key in instance:
        if key in properties:
            continue
        try:
            if any(_search(pattern, key) for pattern in patterns):
                continue
        except _PatternTimeout:
            yield _timed_out("|".join(patterns))
            return
        extras.append(key)
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        shown = ", ".join(repr(key) for key in sorted(extras))
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(f"Additional properties are not allowed ({shown} {verb} unexpected)")


def _cut(text: str) -> str:
    return text if len(text) <= _QUOTED else text[:_QUOTED] + "…"
