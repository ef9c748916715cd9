"""Wire casing: we emit camelCase and read camelCase or PascalCase (DESIGN §2).

Tool arguments, mode catalogs and workflow manifests take either casing per field (and
snake_case). HTTP request bodies take either casing per object, all camelCase or all
PascalCase, which is what their OpenAPI schema says: each body is ``anyOf`` its camelCase
form and its PascalCase form (:func:`with_pascal_case_variant`).
"""

from __future__ import annotations

import copy
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import AliasChoices
from pydantic.alias_generators import to_camel, to_pascal

__all__ = [
    "FieldGivenTwice",
    "any_case",
    "field_spellings",
    "from_pascal_case",
    "match_documented_keys",
    "repeated_field",
    "repeated_spelling",
    "with_pascal_case_variant",
]

#: What a body mixing the two casings is told.
MIXED_CASING = "Use one casing per object: all camelCase or all PascalCase keys"


def any_case(name: str) -> AliasChoices:
    """The aliases a field accepts: ``workflowId``, ``WorkflowId`` and ``workflow_id``."""
    return AliasChoices(to_camel(name), to_pascal(name), name)


def field_spellings(names: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    """The spellings each field of ``names`` is read in, camelCase first (:func:`any_case`).

    A field read in one spelling only cannot be given twice and is left out. Work this out
    once per model: it is too slow to repeat on every call of a tool.
    """
    out: list[tuple[str, ...]] = []
    for name in names:
        spellings = tuple(dict.fromkeys(c for c in any_case(name).choices if isinstance(c, str)))
        if len(spellings) > 1:
            out.append(spellings)
    return tuple(out)


def repeated_spelling(data: Any, fields: Sequence[tuple[str, ...]]) -> str | None:
    """Why ``data`` gives a field of ``fields`` (from :func:`field_spellings`) in two spellings."""
    if not isinstance(data, dict):
        return None
    for spellings in fields:
        given = [key for key in spellings if key in data]
        if len(given) > 1:
            quoted = " and ".join(f"'{key}'" for key in given)
            return f"'{spellings[0]}' is given twice ({quoted}): use one casing per field."
    return None


def repeated_field(data: Any, names: Iterable[str]) -> str | None:
    """Why ``data`` gives one of the fields ``names`` in two spellings, or None when it does not.

    Each field is read in any casing (:func:`any_case`), so ``expectedRevision`` beside
    ``expected_revision`` would leave one value unread without a word.
    """
    return repeated_spelling(data, field_spellings(names))


def _lower_first(key: str) -> str:
    return key[:1].lower() + key[1:]


def from_pascal_case(data: Any) -> Any:
    """An all-PascalCase object with camelCase keys; mixed casing raises ``ValueError``.

    Only the object's own keys are renamed: nested request objects do the same for theirs.
    """
    if not isinstance(data, dict) or not data:
        return data
    upper = [key for key in data if isinstance(key, str) and key[:1].isupper()]
    if not upper:
        return data
    lower = [key for key in data if not (isinstance(key, str) and key[:1].isupper())]
    if lower:
        raise ValueError(f"{MIXED_CASING} (got '{lower[0]}' and '{upper[0]}')")
    return {_lower_first(key): value for key, value in data.items()}


def _pascal_keys(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its own property names (and required lists) in PascalCase."""
    out = dict(node)
    if isinstance(node.get("properties"), dict):
        out["properties"] = {
            key[:1].upper() + key[1:]: value for key, value in node["properties"].items()
        }
    if isinstance(node.get("required"), list):
        out["required"] = [key[:1].upper() + key[1:] for key in node["required"]]
    for combinator in ("anyOf", "oneOf", "allOf"):
        # Conditions on the object's own keys (ExecuteRequest's "instruction or toolResults").
        if isinstance(node.get(combinator), list):
            out[combinator] = [
                _pascal_keys(option) if isinstance(option, dict) else option
                for option in node[combinator]
            ]
    return out


def with_pascal_case_variant(schema: dict[str, Any]) -> dict[str, Any]:
    """A request body's schema as ``anyOf`` its camelCase form and its PascalCase form."""
    camel = copy.deepcopy(schema)
    title = camel.pop("title", None)
    description = camel.pop("description", None)
    pascal = _pascal_keys(copy.deepcopy(camel))
    camel["title"], pascal["title"] = "camelCase", "PascalCase"
    out: dict[str, Any] = {"anyOf": [camel, pascal]}
    if title is not None:
        out["title"] = title
    out["description"] = (
        f"{description}\n\n" if description else ""
    ) + "Keys in camelCase or in PascalCase, one casing per object."
    return out


def _fold(key: str) -> str:
    return key.replace("_", "").lower()


def match_documented_keys(value: Any, schema: dict[str, Any], depth: int = 0) -> Any:
    """``value`` with each object key renamed to the property it spells in another casing.

    ``schema`` is a JSON schema with its ``$defs``: nested models of tool arguments (user
    types without our aliases) then read ``Street``, ``street`` or ``zip_code``/``zipCode``
    alike. A key already documented, or ambiguous, is kept as sent. Two keys of one object
    that spell the same property raise :class:`FieldGivenTwice`: one value would go unread.
    """
    return _match(value, schema, schema.get("$defs", {}), depth, None)


#: Where an object is, as (where its parent is, its key or index); None at the top.
_Path = tuple["_Path", Any] | None


class FieldGivenTwice(ValueError):
    """An object gives one property in two spellings; the message names it and them."""


def _match(value: Any, node: dict[str, Any], defs: dict[str, Any], depth: int, path: _Path) -> Any:
    if depth > 64:
        return value
    ref = node.get("$ref")
    if isinstance(ref, str):
        node = defs.get(ref.rsplit("/", 1)[-1], {})
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = [o for o in node.get(combinator, ()) if isinstance(o, dict)]
        shaped = [o for o in options if o.get("type") != "null"]
        if len(shaped) == 1:  # ``Model | None``: one shape to follow
            value = _match(value, shaped[0], defs, depth + 1, path)
    if isinstance(value, dict):
        props = node.get("properties")
        if isinstance(props, dict):
            return _match_object(value, props, defs, depth, path)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return {
                key: _match(item, extra, defs, depth + 1, (path, key))
                for key, item in value.items()
            }
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        return [
            _match(item, node["items"], defs, depth + 1, (path, index))
            for index, item in enumerate(value)
        ]
    return value


def _match_object(
    value: dict[Any, Any],
    props: dict[str, Any],
    defs: dict[str, Any],
    depth: int,
    path: _Path,
) -> dict[Any, Any]:
    by_fold: dict[str, list[str]] = {}
    for name in props:
        by_fold.setdefault(_fold(name), []).append(name)
    out: dict[Any, Any] = {}
    for key, item in value.items():
        target = _documented(key, props, by_fold)
        if target in out:
            raise FieldGivenTwice(_given_twice(value, target, props, by_fold, path))
        sub = props.get(target)
        out[target] = (
            _match(item, sub, defs, depth + 1, (path, target)) if isinstance(sub, dict) else item
        )
    return out


def _documented(key: Any, props: dict[str, Any], by_fold: dict[str, list[str]]) -> Any:
    """The property ``key`` spells: itself when documented, else the one its letters name."""
    if isinstance(key, str) and key not in props:
        names = by_fold.get(_fold(key), [])
        if len(names) == 1:
            return names[0]
    return key


def _given_twice(
    value: dict[Any, Any],
    target: str,
    props: dict[str, Any],
    by_fold: dict[str, list[str]],
    path: _Path,
) -> str:
    """What the top-level check says (:func:`repeated_spelling`), with the field's path."""
    given = [key for key in value if _documented(key, props, by_fold) == target]
    parts = [target]
    while path is not None:
        path, part = path
        parts.append(part)
    where = ".".join(_shown(part) for part in reversed(parts))
    quoted = " and ".join(f"'{_shown(key)}'" for key in given)
    return f"'{where}' is given twice ({quoted}): use one casing per field."


def _shown(part: Any) -> str:
    """``part`` of a path or a key as sent, its control and invisible characters escaped."""
    return "".join(
        f"\\u{ord(char):04x}" if unicodedata.category(char) in _HIDDEN else char
        for char in str(part)
    )


#: Control, format (bidi overrides), surrogate and line-separating characters.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
