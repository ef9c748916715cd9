"""The Aptix exception tree.

Expected failures of tools and services are *values*: ``InvokeResult.from_error(...)``.
Exceptions are kept for the two other kinds of failure:

    AptixError                       base of everything Aptix raises on purpose
    ├── ConfigurationError           bad settings or catalog data (modes, workflow manifests),
    │                                found at start-up
    │   ├── ToolContractError        a tool class breaks the TUL-011 contract (registry checks)
    │   └── PluginLoadError          a third-party ``aptix.tools`` entry point failed to load
    ├── NotFoundError                a named thing (tool, mode, session, workflow) does not exist
    ├── LlmError                     the model endpoint failed; the message says what to do
    └── TurnError                    a turn request is invalid (e.g. results for unknown calls)

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
    "ToolContractError",
    "TurnError",
]


class AptixError(Exception):
    """Base class of every exception Aptix raises deliberately."""


class ConfigurationError(AptixError):
    """Start-up configuration or catalog data is invalid; the message says where and why."""


class ToolContractError(ConfigurationError):
    """A tool class breaks the tool contract (our ``InvalidOperationException``)."""


class PluginLoadError(ConfigurationError):
    """A third-party tool plugin could not be loaded or registered."""


class NotFoundError(AptixError):
    """A requested tool, mode, session or workflow does not exist for this caller."""


class LlmError(AptixError):
    """The model endpoint failed: unreachable, refused, timed out or answered nonsense."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class TurnError(AptixError):
    """A turn request cannot be carried out as asked; nothing was executed."""
