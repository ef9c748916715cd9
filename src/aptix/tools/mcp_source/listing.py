"""A ``tools/list`` answer read tool by tool: a tool the SDK cannot read is left out alone.

The ``mcp`` SDK reads a page of tools as one: a single tool it refuses (an ``inputSchema``
whose ``type`` is not ``object``, a hint that is not a bool, a schema nested past its JSON
parser) fails the whole listing, and every tool of the server is hidden. :class:`Listings`
notes the session's ``tools/list`` requests as they are sent and reads their answers before
the SDK does: each tool is checked alone, as the SDK checks a page, and one that fails is
dropped and noted with why (:attr:`Listings.left_out`), so the others are registered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from mcp import types
from mcp.shared.message import SessionMessage
from mcp.types.methods import validate_server_result
from pydantic import ValidationError

from aptix.logger import bounded
from aptix.tools.mcp_source.json_parts import elements, members, scalar

__all__ = ["Listings", "ToolListing", "read_refused_page"]

#: The protocol version the SDK checks results against before one is negotiated.
_FALLBACK_VERSION = "2025-11-25"


@dataclass
class ToolListing:
    """A server's tools, and those left out of its listing: name (or ``#place``) -> why."""

    tools: list[types.Tool]
    left_out: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Unparsed:
    """A listed tool nested past the SDK's JSON parser: never parsed, only named."""

    name: str | None
    why: str


class Listings:
    """One session's ``tools/list`` requests in flight, and the tools their answers left out."""

    def __init__(self) -> None:
        self._asked: set[int | str] = set()
        #: The negotiated protocol version, the one the SDK checks a listing against.
        self.version = _FALLBACK_VERSION
        #: The tools the answers left out (name or ``#place`` -> why); the caller clears it.
        self.left_out: dict[str, str] = {}

    def sent(self, item: SessionMessage) -> None:
        """Note ``item`` when it is a ``tools/list`` request."""
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and message.method == "tools/list":
            self._asked.add(_key(message.id))

    def answers(self, item: SessionMessage) -> bool:
        """Whether ``item`` answers one of the session's ``tools/list`` requests."""
        message = item.message
        return (
            isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id is not None
            and _key(message.id) in self._asked
        )

    def received(self, item: SessionMessage) -> SessionMessage:
        """``item`` as the SDK is to read it: a listing's unreadable tools left out and noted."""
        if not self.answers(item):
            return item
        message = item.message
        assert isinstance(message, types.JSONRPCResponse | types.JSONRPCError)  # answers()
        assert message.id is not None  # answers()
        self._asked.discard(_key(message.id))
        if not isinstance(message, types.JSONRPCResponse):
            return item  # an error: the SDK tells it
        tools = message.result.get("tools")
        if not isinstance(tools, list):
            return item  # no listing at all: the SDK tells that
        kept: list[Any] = []
        for place, tool in enumerate(tools, 1):
            problem = self._problem(tool)
            if problem is None:
                kept.append(tool)
            else:
                self.left_out[_name(tool, place)] = problem
        if len(kept) == len(tools):
            return item
        result = {**message.result, "tools": kept}
        answer = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
        return SessionMessage(answer, metadata=item.metadata)

    def _problem(self, tool: Any) -> str | None:
        """Why the SDK would refuse a page holding ``tool``, or None."""
        if isinstance(tool, _Unparsed):
            return tool.why
        try:
            # The checks the SDK runs on a page: the negotiated version's, then its model.
            validate_server_result("tools/list", self.version, {"tools": [tool]})
            types.Tool.model_validate(tool, by_name=False)
        except ValidationError as exc:
            return _why(exc)
        except (KeyError, ValueError):  # no checks for that version: the SDK runs none either
            pass
        return None


def read_refused_page(answer: SessionMessage, line: str) -> SessionMessage:
    """The answer to a listing in ``line``, valid JSON the SDK's parser refused, read here.

    Each tool is parsed alone: one nested past the parser is left out (named when its name can
    be read), the others are kept. ``answer`` (the call's error answer) when anything else in
    the line is nested past the parser too.
    """
    top = members(line)
    result = members(top.get("result") or "") if top is not None else None
    tools = elements(result.get("tools") or "") if result is not None else None
    if top is None or result is None or tools is None or scalar(top.get("jsonrpc")) != "2.0":
        return answer
    read: dict[str, Any] = {}
    try:
        for key, text in result.items():
            if key != "tools":
                read[key] = pydantic_core.from_json(text)
    except ValueError:
        return answer
    read["tools"] = [_parsed(text) for text in tools]
    assert isinstance(answer.message, types.JSONRPCError)  # answer_in's error answer
    page = types.JSONRPCResponse(jsonrpc="2.0", id=answer.message.id, result=read)
    return SessionMessage(page)


def _parsed(text: str) -> Any:
    """A listed tool as the SDK's parser reads it, or why it cannot."""
    try:
        return pydantic_core.from_json(text)
    except ValueError as exc:
        name = scalar((members(text) or {}).get("name"))
        why = f"its listing nests deeper than the MCP SDK reads ({exc})"
        return _Unparsed(name if isinstance(name, str) else None, why)


def _why(exc: ValidationError) -> str:
    """The first thing the SDK finds wrong with a tool, where it is and what it was."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = first["loc"][2:] if first["loc"][:2] == ("tools", 0) else first["loc"]
    where = ".".join(str(part) for part in loc) or "the tool"
    value = first.get("input")
    shown = ""
    if first["type"] != "missing" and (value is None or isinstance(value, str | int | float)):
        shown = f", not {bounded(json.dumps(value), 80)}"
    more = f"; {len(errors) - 1} more problems" if len(errors) > 1 else ""
    return f"the MCP SDK cannot read its listing ({where}: {first['msg']}{shown}{more})"


def _name(tool: Any, place: int) -> str:
    name = tool.name if isinstance(tool, _Unparsed) else None
    if isinstance(tool, dict) and isinstance(tool.get("name"), str):
        name = tool["name"]
    return name if name is not None else f"#{place}"


def _key(request_id: int | str) -> int | str:
    """The id as the SDK matches answers to requests: ``"7"`` answers request 7."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            pass
    return request_id
