"""A JSON text's outer parts, read without recursion: for answers nested past a parser's limit.

The ``mcp`` SDK reads a server's line with pydantic's JSON parser, which refuses one nested
deeper than 200 levels as if it were not JSON. Such a line may still be a valid answer to a
call: :func:`members` and :func:`elements` read its outer object or array at any depth, each
part kept as its own JSON text, so that the call's id can be found and the parts read one by
one (a scalar by :func:`scalar`).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["elements", "members", "scalar"]

#: Reads one string at a time (no nesting: no recursion).
_STRINGS = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
#: What may come next, after: an opening ``{`` (a key or ``}``), a ``,`` in an object (a key),
#: a key (``:``), ``:``, a ``,`` in an array or the start (a value), an opening ``[`` (a value
#: or ``]``), and a value (``,`` or the container's end).
_KEY_OR_END, _KEY, _COLON, _VALUE, _VALUE_OR_END, _NEXT = range(6)


def members(text: str) -> dict[str, str] | None:
    """The members of the object ``text`` is, each value as its JSON text.

    None unless ``text`` is one valid JSON object (a later member of the same key wins, as
    in :func:`json.loads`).
    """
    parts = _parts(text, "{")
    return None if parts is None else {key or "": value for key, value in parts}


def elements(text: str) -> list[str] | None:
    """The elements of the array ``text`` is, each as its JSON text; None unless it is one."""
    parts = _parts(text, "[")
    return None if parts is None else [value for _, value in parts]


def scalar(text: str | None) -> Any:
    """The value of a part that is a string, number, ``true``, ``false`` or ``null``.

    None for anything else (an object or array, nothing): it is never read here.
    """
    if text is None or text[:1] in ("{", "["):
        return None
    return json.loads(text)  # no nesting: no recursion


def _parts(text: str, opener: str) -> list[tuple[str | None, str]] | None:
    """The outer container's parts (key or None, JSON text), or None when ``text`` is not one.

    One pass over the tokens, keeping the open containers on a list rather than the stack.
    """
    start = _SPACE.match(text).end()  # type: ignore[union-attr]  # it matches the empty text
    if not text.startswith(opener, start):
        return None
    parts: list[tuple[str | None, str]] = []
    open_: list[str] = []
    state, key, begun, i, end = _VALUE, None, 0, start, len(text)
    try:
        while True:
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            if i >= end:
                return None  # cut short
            c = text[i]
            if state == _NEXT and c == ",":
                state, i = (_KEY if open_[-1] == "{" else _VALUE), i + 1
            elif c in "]}" and (
                state == _NEXT
                or (state == _VALUE_OR_END and c == "]")
                or (state == _KEY_OR_END and c == "}")
            ):
                if open_.pop() != ("[" if c == "]" else "{"):
                    return None
                i += 1
                if not open_:  # the outer container ended: nothing may follow
                    return parts if _SPACE.match(text, i).end() == end else None  # type: ignore[union-attr]
                if len(open_) == 1:
                    parts.append((key, text[begun:i]))
                state = _NEXT
            elif state in (_KEY, _KEY_OR_END) and c == '"':
                name, i = _STRINGS.raw_decode(text, i)
                if len(open_) == 1:
                    key = name
                state = _COLON
            elif state == _COLON and c == ":":
                state, i = _VALUE, i + 1
            elif state in (_VALUE, _VALUE_OR_END):
                if len(open_) == 1:
                    begun = i
                if c in "[{":
                    open_.append(c)
                    state, i = (_VALUE_OR_END if c == "[" else _KEY_OR_END), i + 1
                    continue
                if c == '"':
                    i = _STRINGS.raw_decode(text, i)[1]
                else:
                    found = _SCALAR.match(text, i)
                    if found is None:
                        return None
                    i = found.end()
                if len(open_) == 1:
                    parts.append((key, text[begun:i]))
                state = _NEXT
            else:
                return None
    except ValueError:  # a string that is not JSON
        return None
