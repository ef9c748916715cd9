"""The authoring envelope (TUL-006 §10.3) and the fields ``update_workflow`` may change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic.alias_generators import to_camel

from aptix.workflows.validation import FieldProblem

__all__ = [
    "MANDATORY_FIELDS",
    "UPDATABLE_FIELDS",
    "AuthoringOutcome",
    "is_empty",
    "normalise_fields",
]

#: The fields ``update_workflow`` may set (camelCase; PascalCase and snake_case accepted).
UPDATABLE_FIELDS = (
    "title",
    "description",
    "userIntentPatterns",
    "requiredInputs",
    "instructionText",
    "permittedTools",
    "completionCriteria",
    "followUpOptions",
    "preconditions",
    "notes",
    "version",
    "status",
    "visibility",
    "autoStart",
    "requiresApproval",
    "destructiveActions",
    "allowedTransitions",
)
#: Fields that, once given, cannot be emptied again.
MANDATORY_FIELDS = frozenset(
    {"title", "description", "userIntentPatterns", "instructionText", "completionCriteria"}
)
_KEYS = {k.casefold(): k for k in UPDATABLE_FIELDS} | {
    "user_intent_patterns": "userIntentPatterns",
    "required_inputs": "requiredInputs",
    "instruction_text": "instructionText",
    "permitted_tools": "permittedTools",
    "completion_criteria": "completionCriteria",
    "follow_up_options": "followUpOptions",
    "auto_start": "autoStart",
    "requires_approval": "requiresApproval",
    "destructive_actions": "destructiveActions",
    "allowed_transitions": "allowedTransitions",
}


@dataclass(frozen=True, slots=True)
class AuthoringOutcome:
    """The TUL-006 §10.3 envelope: ``{ok, workflow?, workflows?, messages?}`` or errors."""

    ok: bool
    workflow: dict[str, Any] | None = None
    workflows: list[dict[str, Any]] | None = None
    messages: tuple[str, ...] = ()
    errors: tuple[FieldProblem, ...] = field(default=())
    history: list[dict[str, Any]] | None = None
    #: The workflow's newest stored revision after the operation (what ``ETag`` carries).
    revision: int | None = None
    #: On a refused change: the revision the workflow is at (the change was based on another).
    current_revision: int | None = None

    @property
    def conflict(self) -> bool:
        """True when a change was refused because the workflow moved on (409/412 over HTTP)."""
        return self.current_revision is not None

    @classmethod
    def fail(cls, field_name: str, message: str) -> AuthoringOutcome:
        """A failure with one error."""
        return cls(ok=False, errors=(FieldProblem(field_name, message),))

    @classmethod
    def failures(cls, problems: list[FieldProblem]) -> AuthoringOutcome:
        """A failure with several errors."""
        return cls(ok=False, errors=tuple(problems))

    def to_wire(self) -> dict[str, Any]:
        """The JSON object the tool returns."""
        if not self.ok:
            failed: dict[str, Any] = {"ok": False, "errors": [e.to_wire() for e in self.errors]}
            if self.revision is not None:  # what a read found wanting (validate_workflow)
                failed["revision"] = self.revision
            if self.current_revision is not None:
                failed["currentRevision"] = self.current_revision
            return failed
        out: dict[str, Any] = {"ok": True}
        if self.revision is not None:
            out["revision"] = self.revision
        if self.workflow is not None:
            out["workflow"] = self.workflow
        if self.workflows is not None:
            out["workflows"] = self.workflows
        if self.history is not None:
            out["history"] = self.history
        if self.messages:
            out["messages"] = list(self.messages)
        return out


def normalise_fields(fields: Mapping[str, Any]) -> tuple[dict[str, Any], list[FieldProblem]]:
    """Map accepted spellings onto camelCase field names; unknown or repeated keys are problems."""
    changes: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    problems: list[FieldProblem] = []
    allowed = ", ".join(UPDATABLE_FIELDS)
    for key, value in fields.items():
        name = _KEYS.get(str(key).casefold()) or _KEYS.get(to_camel(str(key)).casefold())
        if name is None:
            problems.append(
                FieldProblem(str(key), f"'{key}' cannot be updated. Allowed fields: {allowed}.")
            )
        elif name in spelled:
            # Either value could be the one meant: neither is chosen silently.
            problems.append(
                FieldProblem(
                    name,
                    f"{name} is given twice ('{spelled[name]}' and '{key}'); "
                    "use one casing per field.",
                )
            )
        else:
            changes[name] = value
            spelled[name] = str(key)
    return changes, problems


def is_empty(value: Any) -> bool:
    """True for None, blank strings and empty collections."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, list | tuple | dict):
        return len(value) == 0
    return False
