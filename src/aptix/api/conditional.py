"""Conditional tool calls: ``If-Match`` in, ``ETag`` out (RFC 9110 §13.1.1, §8.8.3).

A tool that takes ``expectedRevision`` (``agent_workflow_authoring``) reports the revision of
what it read or wrote as ``revision`` in its result, and refuses a change based on another
revision with ``currentRevision``. Over HTTP the revision is the entity tag: the response
carries ``ETag: "<revision>"``, ``If-Match: "<revision>"`` becomes ``expectedRevision``, and a
refused change answers 412 under ``If-Match`` (the precondition failed) or 409 without it
(another request changed the workflow first), in the JSON error envelope.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Protocol, runtime_checkable

from aptix.api.errors import ApiError
from aptix.casing import any_case
from aptix.tools.base import AgentTool
from aptix.tools.registry import AgentToolRegistry

__all__ = [
    "EXPECTED_REVISION",
    "RevisionReader",
    "apply_if_match",
    "cannot_match",
    "current_revision",
    "etag_headers",
    "if_match_field",
    "is_conditional",
]

#: The argument a conditional tool takes.
EXPECTED_REVISION = "expectedRevision"
#: Every spelling of it a tool reads (``ExpectedRevision``, ``expected_revision`` too).
_SPELLINGS = tuple(c for c in any_case("expected_revision").choices if isinstance(c, str))

#: The tags an ``ETag`` of ours can be: a revision as ``str(int)`` writes it, in ASCII digits.
#: Strong comparison is of the text (RFC 9110 §8.8.3.2), so ``"039"`` matches no revision.
_TAG = re.compile(r'[ \t]*"(0|[1-9][0-9]{0,8})"[ \t]*')


def is_conditional(registry: AgentToolRegistry, name: str) -> bool:
    """True when tool ``name`` takes ``expectedRevision`` (its results carry revisions)."""
    tool = registry.get_tool_type(name)
    return tool is not None and _takes_revision(tool)


@functools.cache
def _takes_revision(tool: type[AgentTool]) -> bool:
    schema = tool.schema()
    properties = schema.get("parameters", schema).get("properties", {})
    return EXPECTED_REVISION in properties


def if_match_field(lines: list[str]) -> str | None:
    """The ``If-Match`` field from all its lines: one comma-separated list (RFC 9110 §5.3).

    A second line is part of the precondition, so ``"1"`` and ``"9"`` sent as two lines are
    the list ``"1", "9"``, which cannot match, exactly as when sent on one line. Empty lines
    add nothing (RFC 9110 §5.6.1); None when there is no line at all.
    """
    if not lines:
        return None
    return ", ".join(line.strip() for line in lines if line.strip())


@runtime_checkable
class RevisionReader(Protocol):
    """A tool with revisions that reads the revision its arguments' subject is at now."""

    async def current_revision(self, arguments: str, org: str) -> int | None:
        """The revision an ``ETag`` names now; None when there is none to name."""


def _states_nothing(if_match: str) -> bool:
    # An empty field states no precondition; ``*`` one that any current revision meets.
    return if_match.strip() in ("", "*")


def cannot_match(if_match: str | None) -> bool:
    """True when ``If-Match`` is a weak, malformed or listed tag, which no revision matches."""
    return if_match is not None and not _states_nothing(if_match) and not _TAG.fullmatch(if_match)


async def current_revision(tool: AgentTool | None, arguments: str, org: str) -> int | None:
    """The revision ``tool``'s subject is at for ``org``, when the tool can read it."""
    if not isinstance(tool, RevisionReader):
        return None
    return await tool.current_revision(arguments, org)


def apply_if_match(
    name: str,
    conditional: bool,
    arguments: str,
    if_match: str | None,
    *,
    current: int | None = None,
) -> str:
    """``arguments`` with ``If-Match``'s revision as ``expectedRevision``.

    An If-Match that cannot match (a tool without revisions, a weak, malformed or listed tag)
    fails its precondition: 412, as RFC 9110 §13.1.1 has it for a tag that does not match.
    A weak, malformed or listed tag's 412 names the ``current`` revision, when the tool read
    one, and carries its ``ETag``, as a stale tag's does.
    """
    if if_match is None or _states_nothing(if_match):
        return arguments
    if not conditional:
        # No revision, so no entity tag can match (RFC 9110 §13.1.1): the precondition fails.
        raise ApiError(
            412,
            f"The tool '{name}' has no revisions, so If-Match cannot match; send it only to "
            "tools that take 'expectedRevision'.",
            "precondition_failed",
        )
    matched = _TAG.fullmatch(if_match)
    if matched is None and current is None:
        raise ApiError(
            412,
            'If-Match cannot match: send one strong entity tag from an ETag, like "7" '
            "(quotes included).",
            "precondition_failed",
        )
    if matched is None:
        raise ApiError(
            412,
            f"If-Match cannot match: the current revision is {current}; send its ETag, "
            f'"{current}" (quotes included), as one strong entity tag.',
            "precondition_failed",
            headers={"ETag": f'"{current}"'},
        )
    revision = int(matched.group(1))
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        return arguments  # the tool refuses them with its usual message
    given = {key: parsed[key] for key in _SPELLINGS if key in parsed}
    for key, value in given.items():
        if isinstance(value, bool):
            raise ApiError(400, f"{key} must be a revision number, not {json.dumps(value)}.")
        if value is not None and value != revision:
            raise ApiError(400, f"If-Match names revision {revision}, but {key} is {value!r}.")
    # One spelling left, so the tool cannot read a stale one beside If-Match's.
    kept = {key: value for key, value in parsed.items() if key not in given}
    return json.dumps({**kept, EXPECTED_REVISION: revision})


def etag_headers(result: Any, *, if_match: bool) -> dict[str, str]:
    """The ``ETag`` of a revisioned result; a refused change raises 412 or 409 instead."""
    if not isinstance(result, dict):
        return {}
    current = result.get("currentRevision")
    if result.get("ok") is False and isinstance(current, int):
        errors = result.get("errors") or [{}]
        message = str(errors[0].get("message") or "The workflow changed meanwhile.")
        raise ApiError(412 if if_match else 409, message, headers={"ETag": f'"{current}"'})
    revision = result.get("revision")
    return {"ETag": f'"{revision}"'} if isinstance(revision, int) else {}
