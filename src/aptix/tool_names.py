"""Tool names and ``<prefix>_*`` patterns, as modes and workflows may list them (DESIGN §9).

The only valid pattern is a configured MCP server's ``<prefix>_*`` (``is_known``), and it
names exactly that server's tools: start-up refuses a prefix under which other tools would
fall (``McpToolSource.check_prefixes``). A pattern is matched by name. One of the server's
tools may be named on its own, ``<prefix>_<tool>``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["expand_names", "is_known", "is_pattern", "matches"]


def is_pattern(name: str) -> bool:
    """True for a name ending in ``*``: every tool whose name starts with the rest."""
    return name.endswith("*")


def matches(name: str, pattern: str) -> bool:
    """Whether tool ``name`` is ``pattern`` or falls under it (case-insensitive)."""
    if is_pattern(pattern):
        return name.casefold().startswith(pattern[:-1].casefold())
    return name.casefold() == pattern.casefold()


def expand_names(names: Iterable[str], registered: Iterable[str]) -> list[str]:
    """``names`` with each pattern replaced by the registered tools it takes, without repeats."""
    known = list(registered)
    out: list[str] = []
    seen: set[str] = set()
    for name in names:
        for tool in [t for t in known if matches(t, name)] if is_pattern(name) else [name]:
            if tool.casefold() not in seen:
                seen.add(tool.casefold())
                out.append(tool)
    return out


def is_known(name: str, known: Iterable[str]) -> bool:
    """Whether ``name`` (a tool or a pattern) is one of ``known`` (tools and server patterns).

    A pattern is known only as itself: the ``<prefix>_*`` of a configured MCP server, which
    start-up adds to ``known``. Matching it against the tools instead would let ``*`` or
    ``agent_*`` stand for built-in tools and lift a workflow's or a mode's limits entirely.
    A single tool of such a server, ``<prefix>_<tool>``, is known once the server listed it;
    while its tools are not listed (the server is not started, or down) it is taken to be
    the server's own, as no other tool falls under its prefix.
    """
    items = list(known)
    folded = name.casefold()
    if any(item.casefold() == folded for item in items):
        return True
    if is_pattern(name):
        return False
    return any(
        len(name) >= len(server)
        and matches(name, server)
        and not any(matches(tool, server) for tool in items if not is_pattern(tool))
        for server in items
        if is_pattern(server)
    )
