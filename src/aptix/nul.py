r"""One policy for text that cannot be stored or sent back, applied where text enters Aptix.

PostgreSQL cannot store U+0000 in text and SQLite can, so without a policy the same request
succeeds on one back end and fails on the other. A lone surrogate (``"\\ud800"`` in JSON)
decodes to a Python string that no UTF-8 encoder accepts: stored, it would make every later
answer that shows it fail. Text from a client (API bodies, URLs, MCP tool arguments) is
refused with a clear message; text from the model and from tools, which no one can be asked
to resend, has each such character replaced by U+FFFD before anything stores it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "NUL_REFUSED",
    "REPLACEMENT",
    "SURROGATE_REFUSED",
    "dotted",
    "find_nul",
    "find_nul_in_json",
    "find_place",
    "find_surrogate",
    "find_surrogate_in_json",
    "not_utf8",
    "shown",
    "storable",
    "storable_json",
    "storable_value",
    "without_nul",
    "without_nul_in_json",
    "without_surrogates",
]

REPLACEMENT = "\ufffd"

#: What a client is told when its text carries a NUL.
NUL_REFUSED = "NUL characters (\\u0000) are not accepted in text"

#: What a client is told when its text carries a lone surrogate.
SURROGATE_REFUSED = (
    "Lone surrogate characters (\\ud800-\\udfff without their pair) are not accepted in text"
)

# ``\u0000`` in JSON text, unless its backslash is itself escaped.
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
# Once decoded, a valid pair is one code point: any surrogate left in a str is lone.
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Python decodes argv and standard input with ``surrogateescape``: a byte 0x80-0xFF that is not
# part of valid UTF-8 becomes U+DC80-U+DCFF. Such a code point in typed text is that byte.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def shown(key: Any) -> str:
    """``key`` as text for a message, each NUL and lone surrogate written as its escape.

    A raw NUL or lone surrogate in a refusal's message would make the message itself
    unstorable, or unsendable as UTF-8 (a 500 instead of the refusal).
    """
    return _UNSTORABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", str(key))


def _place(where: str, key: Any) -> str:
    """The dotted location of ``key`` under ``where``, its unstorable characters escaped."""
    return f"{where}.{shown(key)}" if where else shown(key)


#: A place in decoded JSON as a chain of links, (key or index, the parent's link): one tuple
#: per item, however deep, where a list per item would copy its parent's.
_Link = tuple[str | int, "_Link"] | None


def find_place(value: Any, wanted: Callable[[Any], bool]) -> list[str | int] | None:
    """The keys and indexes leading to the first item of ``value`` that is ``wanted``, if any.

    In the order the JSON was written, and without recursion: decoded JSON may nest as deep
    as its parser reads.
    """
    stack: list[tuple[Any, _Link]] = [(value, None)]
    while stack:
        item, link = stack.pop()
        if wanted(item):
            path: list[str | int] = []
            while link is not None:
                step, link = link
                path.append(step)
            return path[::-1]
        if isinstance(item, dict):
            stack.extend((v, (k, link)) for k, v in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((item[i], (i, link)) for i in range(len(item) - 1, -1, -1))
    return None


def dotted(path: Sequence[str | int]) -> str:
    """A place as :func:`find_nul` writes one (``tools[0].function``), its keys :func:`shown`."""
    parts: list[str] = []
    for step in path:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        else:
            parts.append(f".{shown(step)}" if parts else shown(step))
    return "".join(parts)


def find_nul(value: Any, where: str = "") -> str | None:
    """The dotted location of the first string (or key) in ``value`` holding a NUL, if any."""
    if isinstance(value, str):
        return where or "value" if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            place = _place(where, key)
            if "\x00" in str(key):
                return place
            if (found := find_nul(item, place)) is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (found := find_nul(item, f"{where}[{index}]")) is not None:
                return found
    return None


def find_nul_in_json(text: str) -> str | None:
    """Like :func:`find_nul` for JSON text (text that is not JSON is checked as is)."""
    try:
        return find_nul(json.loads(text))
    except (ValueError, RecursionError):
        return find_nul(text)


def without_nul(text: str) -> str:
    """``text`` with every NUL replaced by U+FFFD."""
    return text.replace("\x00", REPLACEMENT)


def without_nul_in_json(text: str) -> str:
    """JSON text whose strings, once parsed, hold U+FFFD where they held NUL."""
    return _ESCAPED_NUL.sub(r"\1\\ufffd", without_nul(text))


def find_surrogate(value: Any, where: str = "") -> str | None:
    """The dotted location of the first string (or key) in ``value`` with a lone surrogate."""
    if isinstance(value, str):
        return where or "value" if not value.isascii() and _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            place = _place(where, key)
            if find_surrogate(str(key)) is not None:
                return place
            if (found := find_surrogate(item, place)) is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (found := find_surrogate(item, f"{where}[{index}]")) is not None:
                return found
    return None


def not_utf8(text: str) -> str | None:
    """What to tell a person whose typed ``text`` held a byte that is not UTF-8, else None.

    For text that came as bytes (argv, a terminal or pipe): there a lone surrogate is always a
    byte Python could not decode, and "lone surrogate" would name Python's stand-in for it, not
    what the person sent. The first such byte is named (as hex: the byte itself is not text).
    """
    if text.isascii() or (found := _ESCAPED_BYTE.search(text)) is None:
        return None
    return f"The byte 0x{ord(found.group()) - 0xDC00:02x} is not valid UTF-8; text must be UTF-8"


def find_surrogate_in_json(text: str) -> str | None:
    """Like :func:`find_surrogate` for JSON text (text that is not JSON is checked as is)."""
    try:
        return find_surrogate(json.loads(text))
    except (ValueError, RecursionError):
        return find_surrogate(text)


def storable(text: str) -> str:
    """``text`` with every NUL and lone surrogate replaced by U+FFFD."""
    if text.isascii():
        return text.replace("\x00", REPLACEMENT) if "\x00" in text else text
    return _UNSTORABLE.sub(REPLACEMENT, text)


def without_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (NUL kept): encodable as UTF-8."""
    return text if text.isascii() else _SURROGATE.sub(REPLACEMENT, text)


def storable_json(text: str) -> str:
    """JSON text that decodes to :func:`storable` strings (its escapes rewritten in place)."""
    text = storable(text)
    if "\\u" in text:
        text = _ESCAPED_SURROGATE.sub(_fix_escape, _ESCAPED_NUL.sub(r"\1\\ufffd", text))
    return text


def storable_value(value: Any) -> Any:
    """``value`` (decoded JSON) with :func:`storable` applied to every string and key."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): storable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_value(v) for v in value]
    return value


# A ``\uD800``-``\uDFFF`` escape (unless its backslash is escaped), with the escape after it.
_ESCAPED_SURROGATE = re.compile(
    r"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    r"|(?<!\\)((?:\\\\)*)\\u([dD][c-fC-F][0-9a-fA-F]{2})"
)


def _fix_escape(match: re.Match[str]) -> str:
    if match.group(2) is not None:  # a high surrogate: fine when its low one follows
        if match.group(3) is not None:
            return match.group(0)
        return f"{match.group(1)}\\ufffd"
    return f"{match.group(4)}\\ufffd"  # a low surrogate alone
