"""``ModeDefinition``: one entry of the mode catalog (TUL-010 summary fields plus prompt data)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from aptix.casing import any_case

__all__ = ["ModeDefinition"]

MODE_ID = re.compile(r"^[0-9a-f]{32}$")
MODE_KEY = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


class ModeDefinition(BaseModel):
    """A mode: what it is for, how the model should behave in it, and which tools it offers."""

    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=any_case, serialization_alias=to_camel),
        extra="forbid",
        frozen=True,
    )

    id: str = Field(description="32 lowercase hex characters (a GUID without hyphens).")
    key: str = Field(description="Stable snake_case key used by sessions and tools.")
    display_name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    system_prompt_summary: str = ""
    is_default: bool = False
    human_role_hints: tuple[str, ...] | None = None
    example_utterances: tuple[str, ...] | None = None
    instructions: str = Field(min_length=1)
    welcome_message: str = ""
    tools: tuple[str, ...] = ()
    status: Literal["active", "experimental", "deprecated"] = "active"

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not MODE_ID.match(value):
            raise ValueError("must be 32 lowercase hex characters (a GUID without hyphens)")
        return value

    @field_validator("key")
    @classmethod
    def _check_key(cls, value: str) -> str:
        if not MODE_KEY.match(value):
            raise ValueError("must be snake_case (lowercase letters, digits and underscores)")
        return value
