"""``InvokeResult``: the one way tools and services report expected failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["ErrorMessage", "InvokeResult"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ErrorMessage:
    """One human-readable error carried by a failed ``InvokeResult``."""

    message: str


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
