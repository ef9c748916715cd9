"""One policy for NUL characters, applied where text enters Aptix.

PostgreSQL cannot store U+0000 in text and SQLite can, so without a policy the same request
succeeds on one back end and fails on the other. Text from a client (API bodies, URLs, MCP
tool arguments) is refused with a clear message; text from the model, which no one can be
asked to resend, has each NUL replaced by U+FFFD before anything stores it.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "NUL_REFUSED",
    "REPLACEMENT",
    "find_nul",
    "find_nul_in_json",
    "without_nul",
    "without_nul_in_json",
]

REPLACEMENT = "\ufffd"

#: What a client is told when its text carries a NUL.
NUL_REFUSED = "NUL characters (\\u0000) are not accepted in text"

# ``\u0000`` in JSON text, unless its backslash is itself escaped.
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def find_nul(value: Any, where: str = "") -> str | None:
    """The dotted location of the first string (or key) in ``value`` holding a NUL, if any."""
    if isinstance(value, str):
        return where or "value" if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            place = f"{where}.{key}" if where else str(key)
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
    except ValueError:
        return find_nul(text)


def without_nul(text: str) -> str:
    """``text`` with every NUL replaced by U+FFFD."""
    return text.replace("\x00", REPLACEMENT)


def without_nul_in_json(text: str) -> str:
    """JSON text whose strings, once parsed, hold U+FFFD where they held NUL."""
    return _ESCAPED_NUL.sub(r"\1\\ufffd", without_nul(text))
