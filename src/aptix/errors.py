"""The Aptix exception tree.

Expected failures of tools and services are *values*: ``InvokeResult.from_error(...)``.
Exceptions are kept for the two other kinds of failure:

    AptixError                       base of everything Aptix raises on purpose
    ├── ConfigurationError           bad settings or catalog data (modes, workflow manifests),
    │                                found at start-up
    │   ├── ToolContractError        a tool class breaks the TUL-011 contract (registry checks)
    │   └── PluginLoadError          a third-party ``aptix.tools`` entry point failed to load
    ├── NotFoundError                a named thing (tool, mode, session, workflow) does not exist
    ├── RevisionConflict             a workflow changed since the revision a change was based on
    │                                (authoring's compare-and-set; 409, or 412 under If-Match)
    ├── ToolError                    raised inside a tool function: a failed result whose
    │                                message the model sees (``@aptix.tool``)
    ├── LlmError                     the model endpoint failed; the message says what to do
    └── TurnError                    a turn request is invalid (e.g. results for unknown calls)
        └── SessionBusyError         the session is running another turn (409 session_busy)

Unexpected exceptions raised inside a tool never escape: the executor logs them with the
``[<ToolName>_ExecuteAsync__Exception]`` tag and turns them into a generic failed result.
"""

from __future__ import annotations

__all__ = [
    "AptixError",
    "ConfigurationError",
    "LlmError",
    "NotFoundError",
    "PluginLoadError",
    "RevisionConflict",
    "SessionBusyError",
    "ToolContractError",
    "ToolError",
    "TurnError",
]


class AptixError(Exception):
    """Base class of every exception Aptix raises deliberately."""


class ConfigurationError(AptixError):
    """Start-up configuration or catalog data is invalid; the message says where and why.

    ``hint`` says how to fix it; the CLI prints ``error: <message> — <hint>`` on one line.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        """The message and, when known, how to fix it, as one line."""
        text = " ".join(str(self).split())
        return f"{text} — {self.hint}" if self.hint else text


class ToolContractError(ConfigurationError):
    """A tool class breaks the tool contract (our ``InvalidOperationException``)."""


class PluginLoadError(ConfigurationError):
    """A third-party tool plugin could not be loaded or registered."""


class NotFoundError(AptixError):
    """A requested tool, mode, session or workflow does not exist for this caller."""


class RevisionConflict(AptixError):
    """A workflow's stored revision is not the one a change was based on: nothing was written."""

    def __init__(self, workflow_id: str, expected: int, current: int) -> None:
        super().__init__(f"Workflow '{workflow_id}' is at revision {current}, not {expected}.")
        self.workflow_id = workflow_id
        self.expected = expected
        self.current = current


class ToolError(AptixError):
    """Raised by a tool function to fail the call with this message, shown to the model."""


class LlmError(AptixError):
    """The model endpoint failed: unreachable, refused, timed out or answered nonsense."""

    #: The code a turn this error ends is stored with; a model call refused by the limits
    #: (no endpoint failed) has its own.
    code = "model_error"

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        from aptix.urls import mask_credentials

        # The message reaches API clients, stored turns and logs: no URL credentials in it.
        super().__init__(mask_credentials(message))
        self.status_code = status_code


class TurnError(AptixError):
    """A turn request cannot be carried out as asked; nothing was executed.

    ``code`` is the stable error code the HTTP API answers with (status 409).
    """

    code = "conflict"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class SessionBusyError(TurnError):
    """The session is running another turn; only one runs at a time."""

    code = "session_busy"
