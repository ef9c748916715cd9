"""``InvokeResult``: the one way tools and services report expected failures."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["ErrorMessage", "InvokeResult", "as_json_text", "json_value"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ErrorMessage:
    """One human-readable error carried by a failed ``InvokeResult``."""

    message: str
    #: How a tool call ended when that was not the tool's own answer (``timed_out``,
    #: ``abandoned``); None otherwise. Not part of the wire shape.
    outcome: str | None = None


@dataclass(frozen=True, slots=True)
class InvokeResult(Generic[T]):
    """The outcome of an operation: a value, or one or more error messages."""

    result: T | None = None
    errors: tuple[ErrorMessage, ...] = ()

    @classmethod
    def create(cls, value: T) -> InvokeResult[T]:
        """Return a successful result carrying ``value``."""
        return cls(result=value)

    @classmethod
    def from_error(cls, message: str, *more: str) -> InvokeResult[T]:
        """Return a failed result with one or more error messages."""
        return cls(errors=tuple(ErrorMessage(m) for m in (message, *more)))

    @property
    def successful(self) -> bool:
        """True when the operation succeeded."""
        return not self.errors

    @property
    def error_message(self) -> str | None:
        """All error messages joined by ``"; "``, or None on success."""
        if not self.errors:
            return None
        return "; ".join(e.message for e in self.errors)

    def to_wire(self) -> dict[str, Any]:
        """Return the JSON shape used by the CLI and HTTP API (``result`` as given)."""
        return {
            "successful": self.successful,
            "result": self.result,
            "errors": [{"message": e.message} for e in self.errors],
        }


def as_json_text(value: str | None) -> str:
    """A tool's successful value as JSON text, as AGN-005 §8 expects of a tool message.

    No value becomes ``null`` (a model is never sent ``content: null``); text that is not
    JSON becomes one JSON string holding it, so plain-text tools still read well. JSON has
    no ``Infinity`` or ``NaN``: in an object or array they become ``null`` (as ``@aptix.tool``
    writes them), so the object stays an object; alone they are text.
    """
    if value is None:
        return "null"
    constants: list[str] = []
    try:
        # Each constant is read as None (what list.append returns) and noted.
        data = json.loads(value, parse_constant=constants.append)
    except (ValueError, RecursionError):
        return json.dumps(value, ensure_ascii=False)
    if not constants:
        return value
    if isinstance(data, dict | list):
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False)


def json_value(text: str | None) -> Any:
    """A tool's result as the JSON value it holds, for the CLI and HTTP API to show.

    Text that is not JSON stays the text it is; no result stays None.
    """
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text
