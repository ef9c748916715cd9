"""``WorkflowManifest``: the TUL-006 §4.2 instruction package plus the governance fields."""

from __future__ import annotations

import re
from enum import StrEnum
from functools import total_ordering
from typing import Any

from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)
from pydantic.alias_generators import to_camel

from aptix.casing import any_case

__all__ = [
    "MANIFEST_FIELDS",
    "RequiredInput",
    "SemVer",
    "WorkflowManifest",
    "WorkflowStatus",
    "WorkflowVisibility",
]

WORKFLOW_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$"
)


class WorkflowStatus(StrEnum):
    """Lifecycle: ``draft → published → deprecated → disabled`` (``active`` means published)."""

    DRAFT = "draft"
    PUBLISHED = "published"
    DEPRECATED = "deprecated"
    DISABLED = "disabled"

    @property
    def runnable(self) -> bool:
        """True for the statuses a session may start (published and deprecated)."""
        return self in (WorkflowStatus.PUBLISHED, WorkflowStatus.DEPRECATED)


class WorkflowVisibility(StrEnum):
    """Who sees a workflow: everyone, only by explicit id, or everyone with a warning."""

    PUBLIC = "public"
    HIDDEN = "hidden"
    EXPERIMENTAL = "experimental"


@total_ordering
class SemVer:
    """A parsed semantic version, ordered by precedence (build metadata ignored)."""

    __slots__ = ("major", "minor", "patch", "pre")

    def __init__(self, text: str) -> None:
        match = _SEMVER.match(text.strip())
        if match is None:
            raise ValueError(f"'{text}' is not a semantic version (MAJOR.MINOR.PATCH)")
        self.major, self.minor, self.patch = (int(match.group(i)) for i in (1, 2, 3))
        self.pre = match.group(4)

    @staticmethod
    def is_valid(text: str) -> bool:
        """True when ``text`` is a semantic version."""
        return _SEMVER.match(text.strip()) is not None

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
        # A pre-release sorts before its release; numeric identifiers before alphanumeric.
        pre: tuple[tuple[int, int | str], ...] = ()
        if self.pre:
            pre = tuple((0, int(p)) if p.isdigit() else (1, p) for p in self.pre.split("."))
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SemVer) and self._key() == other._key()

    def __lt__(self, other: SemVer) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return f"{core}-{self.pre}" if self.pre else core


class _WireModel(BaseModel):
    """camelCase out; camelCase, PascalCase or snake_case in."""

    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=any_case, serialization_alias=to_camel),
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        str_strip_whitespace=True,
    )


class RequiredInput(_WireModel):
    """Something the model must ask the user for before it proceeds."""

    name: str = Field(min_length=1)
    description: str = ""
    required: bool = True


def _as_list(value: Any) -> Any:
    """A single string where a list is expected becomes a one-item list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    return value


class WorkflowManifest(_WireModel):
    """A complete workflow: the script the model follows, and the rules the server enforces.

    The model checks types only, so that incomplete drafts can be stored; whether a manifest
    may be served is decided by :func:`aptix.workflows.validation.validate_manifest`.
    """

    workflow_id: str
    title: str = ""
    description: str = ""
    user_intent_patterns: tuple[str, ...] = ()
    required_inputs: tuple[RequiredInput, ...] = ()
    instruction_text: str = ""
    permitted_tools: tuple[str, ...] = ()
    completion_criteria: tuple[str, ...] = ()
    follow_up_options: tuple[str, ...] = ()
    preconditions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    version: str = "0.1.0"
    status: WorkflowStatus = WorkflowStatus.PUBLISHED
    visibility: WorkflowVisibility = WorkflowVisibility.PUBLIC
    auto_start: bool = False
    requires_approval: bool = False
    destructive_actions: tuple[str, ...] = ()
    allowed_transitions: tuple[str, ...] = ()

    @field_validator("workflow_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not WORKFLOW_ID_PATTERN.match(value):
            raise ValueError(
                "must be 1-64 lowercase letters, digits, '_' or '-', starting with a letter "
                "or digit"
            )
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        # YAML reads "version: 1.0" as a float; report it as a bad version, not a bad type.
        return (
            str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        )

    @field_validator("version")
    @classmethod
    def _check_version(cls, value: str) -> str:
        SemVer(value)  # raises ValueError with a readable message
        return value

    @field_validator("status", mode="before")
    @classmethod
    def _active_means_published(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == "active":
            return WorkflowStatus.PUBLISHED
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("visibility", mode="before")
    @classmethod
    def _lower_visibility(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator(
        "user_intent_patterns",
        "permitted_tools",
        "completion_criteria",
        "follow_up_options",
        "preconditions",
        "notes",
        "destructive_actions",
        "allowed_transitions",
        "required_inputs",
        mode="before",
    )
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return _as_list(value)

    @field_validator("required_inputs", mode="before")
    @classmethod
    def _inputs_from_strings(cls, value: Any) -> Any:
        # Runs before ``_listify`` (pydantic runs the last-defined first): one name is a list.
        value = _as_list(value)
        if isinstance(value, list | tuple):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @property
    def semver(self) -> SemVer:
        """The parsed ``version``."""
        return SemVer(self.version)

    @property
    def runnable(self) -> bool:
        """True when a session may start this workflow."""
        return self.status.runnable

    def to_wire(self) -> dict[str, Any]:
        """The camelCase JSON object the tools and the HTTP API return."""
        return self.model_dump(mode="json", by_alias=True)


#: The camelCase name of every manifest field, in declaration order.
MANIFEST_FIELDS: tuple[str, ...] = tuple(to_camel(n) for n in WorkflowManifest.model_fields)
