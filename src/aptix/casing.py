"""Wire casing: we emit camelCase and read camelCase or PascalCase (DESIGN §2).

Tool arguments, mode catalogs and workflow manifests take either casing per field (and
snake_case). HTTP request bodies take either casing per object, all camelCase or all
PascalCase, which is what their OpenAPI schema says: each body is ``anyOf`` its camelCase
form and its PascalCase form (:func:`with_pascal_case_variant`). How a tool's arguments
are read in any casing is :mod:`aptix.tools.argument_keys`.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import AliasChoices
from pydantic.alias_generators import to_camel, to_pascal

__all__ = ["MIXED_CASING", "any_case", "from_pascal_case", "with_pascal_case_variant"]

#: What a body mixing the two casings is told.
MIXED_CASING = "Use one casing per object: all camelCase or all PascalCase keys"


def any_case(name: str) -> AliasChoices:
    """The aliases a field accepts: ``workflowId``, ``WorkflowId`` and ``workflow_id``."""
    return AliasChoices(to_camel(name), to_pascal(name), name)


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
