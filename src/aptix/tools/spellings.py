"""The keys pydantic reads each field of a tool's arguments by, recorded in its JSON schema.

:mod:`aptix.tools.argument_keys` reads an object's keys by this schema: a property named by
its camelCase alias (``s3Bucket``) cannot be turned back into its field (``s3_bucket``).
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

__all__ = ["SPELLINGS", "reading_schema"]

#: Where :func:`reading_schema` puts, in an object's schema, the keys each property reads as.
SPELLINGS = "x-aptix-spellings"


def reading_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema for reading argument keys, with the keys each field is read by.

    A property named by its camelCase alias (``s3Bucket``) cannot be turned back into the
    field's name (``s3_bucket``, not ``s_3_bucket``), so each object also records the keys
    pydantic reads a field by (its ``AliasChoices``): an object that keeps extra keys reads
    a field by those. Only for reading keys: the schema a model or client sees has none.
    """
    try:
        return model.model_json_schema(
            by_alias=True, mode="validation", schema_generator=_SpelledSchema
        )
    except Exception:  # a type pydantic cannot describe: its fields' own keys still read
        props: dict[str, Any] = {}
        spellings: dict[str, list[str]] = {}
        for name, info in model.model_fields.items():
            prop = info.alias or name
            props[prop] = {}
            keys = _alias_keys(info.validation_alias)
            if len(keys) > 1 and keys[0] == prop:
                spellings[prop] = keys
        schema: dict[str, Any] = {"type": "object", "properties": props, SPELLINGS: spellings}
        if model.model_config.get("extra") == "allow":
            schema["additionalProperties"] = True
        return schema


class _SpelledSchema(GenerateJsonSchema):
    """A JSON schema whose objects record the keys each of their properties is read by."""

    def model_fields_schema(self, schema: core_schema.ModelFieldsSchema) -> JsonSchemaValue:
        """The fields' schema, with the keys each property is read by (when several)."""
        json_schema = super().model_fields_schema(schema)
        props = json_schema.get("properties")
        if not isinstance(props, dict):
            return json_schema
        spellings: dict[str, list[str]] = {}
        for field in schema["fields"].values():
            keys = _alias_keys(field.get("validation_alias"))
            if len(keys) > 1 and keys[0] in props:  # the first is the property's name
                spellings[keys[0]] = keys
        if spellings:
            json_schema[SPELLINGS] = spellings
        return json_schema


def _alias_keys(alias: Any) -> list[str]:
    """The top-level keys a field's validation alias reads (``AliasChoices`` or its paths)."""
    if isinstance(alias, AliasChoices):
        alias = alias.convert_to_aliases()
    if isinstance(alias, str):
        return [alias]
    if not isinstance(alias, list):
        return []
    keys = (
        path[0]
        for path in alias
        if isinstance(path, list) and len(path) == 1 and isinstance(path[0], str)
    )
    return list(dict.fromkeys(keys))  # a field whose camelCase is its name lists it twice
