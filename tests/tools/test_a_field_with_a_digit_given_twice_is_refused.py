"""A field whose name has a digit or a one-letter word is read in the spellings pydantic reads.

Review s2 F1 (round 70): an object whose model keeps extra keys (``extra="allow"``) reads a
field only in its camelCase, PascalCase or snake_case spelling, but those were worked out from
the schema's camelCase name, and ``to_snake`` does not undo ``to_camel`` around digits or
one-letter words: ``s3Bucket`` gave ``s_3_bucket``, not ``s3_bucket``. So
``{"s3Bucket": "camel", "s3_bucket": "snake"}`` ran with the camelCase value dropped and
``s3_bucket`` stored both as the field and as an extra key, where ``orderId`` beside
``order_id`` is refused.
"""

from __future__ import annotations

import json
from itertools import permutations
from typing import Any

import pytest
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from aptix import ToolArgs, parse_arguments


class _Open(ToolArgs):
    model_config = ConfigDict(extra="allow")

    s3_bucket: str | None = Field(None, description="Bucket.")
    ipv4_address: str | None = Field(None, description="Address.")
    x_y_z: str | None = Field(None, description="Point.")


class _OpenPart(ToolArgs):
    model_config = ConfigDict(extra="allow")

    base64_data: str | None = Field(None, description="Data.")


class _Holder(ToolArgs):
    part: _OpenPart | None = Field(None, description="A part.")


class _PlainOpen(BaseModel):
    model_config = ConfigDict(extra="allow")

    http2_only: bool = False
    a_b_c: int = 0


class _PlainHolder(ToolArgs):
    plain: _PlainOpen | None = Field(None, description="A plain part.")


SPELLINGS = {
    "s3_bucket": ("s3Bucket", "S3Bucket", "s3_bucket"),
    "ipv4_address": ("ipv4Address", "Ipv4Address", "ipv4_address"),
    "x_y_z": ("xYZ", "XYZ", "x_y_z"),
}


@pytest.mark.parametrize(
    ("field", "first", "second"),
    [
        (field, first, second)
        for field, spellings in SPELLINGS.items()
        for first, second in permutations(spellings, 2)
    ],
)
def test_a_field_with_a_digit_given_twice_is_refused(field: str, first: str, second: str) -> None:
    told = parse_arguments(_Open, json.dumps({first: "a", second: "b"}))
    assert told.result is None
    assert told.error_message == (
        f"'{SPELLINGS[field][0]}' is given twice ('{first}' and '{second}'): "
        "use one casing per field."
    )


@pytest.mark.parametrize(
    ("field", "key"),
    [(field, key) for field, spellings in SPELLINGS.items() for key in spellings],
)
def test_a_field_with_a_digit_reads_in_each_of_its_spellings_and_is_no_extra_key(
    field: str, key: str
) -> None:
    told = parse_arguments(_Open, json.dumps({key: "v"}))
    assert told.result is not None, told.error_message
    assert getattr(told.result, field) == "v"
    assert told.result.model_extra == {}


@pytest.mark.parametrize("key", ["S3_BUCKET", "S3BUCKET", "s3bucket", "s_3_bucket"])
def test_another_key_with_the_letters_of_a_field_with_a_digit_is_an_extra_key(key: str) -> None:
    told = parse_arguments(_Open, json.dumps({"s3Bucket": "a", key: "b"}))
    assert told.result is not None, told.error_message
    assert told.result.s3_bucket == "a"
    assert told.result.model_extra == {key: "b"}


def test_a_nested_field_with_a_digit_given_twice_is_refused_by_its_path() -> None:
    told = parse_arguments(_Holder, '{"part": {"base64Data": "a", "base64_data": "b"}}')
    assert told.error_message == (
        "'part.base64Data' is given twice ('base64Data' and 'base64_data'): "
        "use one casing per field."
    )
    read = parse_arguments(_Holder, '{"Part": {"base64_data": "b", "BASE64DATA": "c"}}')
    assert read.result is not None, read.error_message
    assert read.result.part is not None
    assert read.result.part.base64_data == "b"
    assert read.result.part.model_extra == {"BASE64DATA": "c"}


@pytest.mark.parametrize(
    ("plain", "refused"),
    [
        ({"http2Only": True, "http2_only": False}, "'plain.http2_only' is given twice"),
        ({"aBC": 1, "ABC": 2}, "'plain.a_b_c' is given twice"),
    ],
)
def test_a_nested_plain_model_refuses_a_field_with_a_digit_given_twice(
    plain: dict[str, Any], refused: str
) -> None:
    told = parse_arguments(_PlainHolder, json.dumps({"plain": plain}))
    assert told.error_message is not None
    assert told.error_message.startswith(refused)


class _Opaque:
    """A type pydantic cannot put in a JSON schema."""


class _OpenOpaque(ToolArgs):
    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    s3_bucket: str | None = Field(None, description="Bucket.")
    thing: _Opaque | None = Field(None, description="A thing.")


def test_a_model_without_a_json_schema_refuses_a_field_with_a_digit_given_twice() -> None:
    told = parse_arguments(_OpenOpaque, '{"s3Bucket": "a", "s3_bucket": "b"}')
    assert told.error_message == (
        "'s3Bucket' is given twice ('s3Bucket' and 's3_bucket'): use one casing per field."
    )


class _OwnAliases(ToolArgs):
    model_config = ConfigDict(extra="allow")

    bucket_name: str = Field(
        validation_alias=AliasChoices("bucket_name", "bucket"), description="Bucket."
    )


class _OwnAliasesPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    region_name: str = Field("eu", validation_alias=AliasChoices("region_name", "region"))


class _OwnAliasesHolder(ToolArgs):
    opts: _OwnAliasesPart = Field(default_factory=_OwnAliasesPart, description="Options.")


@pytest.mark.parametrize("key", ["bucketName", "BucketName", "bucket_name", "bucket"])
def test_a_field_with_aliases_of_its_own_is_read_in_its_casings_too(key: str) -> None:
    # Review s4 F1 (round 70): the field's own AliasChoices replaced its casings, so the
    # camelCase key its schema requires was refused as a missing field.
    told = parse_arguments(_OwnAliases, json.dumps({key: "b1"}))
    assert told.result is not None, told.error_message
    assert told.result.bucket_name == "b1"


@pytest.mark.parametrize("key", ["regionName", "RegionName", "region_name", "region"])
def test_a_nested_field_with_aliases_of_its_own_is_read_in_its_casings_too(key: str) -> None:
    told = parse_arguments(_OwnAliasesHolder, json.dumps({"opts": {key: "us"}}))
    assert told.result is not None, told.error_message
    assert told.result.opts.region_name == "us"
    assert told.result.opts.model_extra == {}


def test_a_field_with_aliases_of_its_own_given_twice_is_refused() -> None:
    top = parse_arguments(_OwnAliases, json.dumps({"bucketName": "a", "bucket_name": "b"}))
    assert "is given twice" in (top.error_message or "")
    nested = {"opts": {"regionName": "a", "region_name": "b"}}
    assert "is given twice" in (
        parse_arguments(_OwnAliasesHolder, json.dumps(nested)).error_message or ""
    )
