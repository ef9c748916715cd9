"""What a terminal whose encoding is not UTF-8 (Latin-1, ASCII) is sent in place of what it lacks.

Python writes to stdout in the locale's encoding: under ``LANG=en_US.ISO-8859-1``, or
``LC_ALL=POSIX`` with ``PYTHONUTF8=0`` (ASCII), a character the encoding has no byte for
(``—``, ``→``, ``␛``, ``中``) raised UnicodeEncodeError and ended ``aptix chat`` with a
traceback before its first prompt. So, on such an output:

- :func:`carried` (applied by :func:`aptix.cli.output.inert`, before Rich measures a line, so
  widths stay right) keeps what the encoding has (``é`` on Latin-1) and replaces the rest:
  the chat's own symbols and common punctuation by ASCII (``→`` is ``->``, ``⚙`` is ``*``),
  the control pictures of a control character by its caret notation (``␛`` is ``^[``, as
  ``cat -v`` writes it), and anything else by its code point, ``<U+4E2D>``, the way outside
  text already spells what it must not send raw;
- :func:`tolerant_output` makes the chat's streams replace, never fail on, a character
  that reaches them unreplaced (a Markdown bullet, a spinner frame, the "…" of a cut line:
  Rich's own), with one cell for one cell.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import io
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["carried", "carries", "tolerant_output"]

#: ASCII for the chat's own symbols and the punctuation models write most.
_ASCII = {
    "\u2014": "-",  # — (em dash)
    "\u2013": "-",  # – (en dash)
    "\u2026": "...",  # …
    "\u2192": "->",  # →
    "\u2190": "<-",  # ←
    "\u2699": "*",  # ⚙ (a tool call)
    "\u27e8": "<",  # ⟨ (around a run of spaces' length)
    "\u27e9": ">",  # ⟩
    "\u2022": "*",  # • (a Markdown bullet)
    "\u258c": "|",  # ▌ (a Markdown quote)
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\U0001f306": "[image]",  # 🌆 (a Markdown image)
}
# The control pictures inert() shows a control character as: its caret notation.
_ASCII.update({chr(0x2400 + c): "^" + chr(0x40 + c) for c in range(0x20)})
_ASCII["\u2421"] = "^?"  # DEL
#: The replacements of one character, for a stream (a line Rich measured must keep its width).
_ONE_CELL = {k: v for k, v in _ASCII.items() if len(v) == 1} | {"\u2026": "."}

_SHOWN = "aptix-carried"
_STREAMED = "aptix-streamed"


def _shown(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    lacked = error.object[error.start : error.end]
    return "".join(_ASCII.get(c, f"<U+{ord(c):04X}>") for c in lacked), error.end


def _streamed(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    lacked = error.object[error.start : error.end]
    return "".join(_ONE_CELL.get(c, "?") for c in lacked), error.end


codecs.register_error(_SHOWN, _shown)
codecs.register_error(_STREAMED, _streamed)


@functools.lru_cache(maxsize=8)
def _narrow(encoding: str) -> str | None:
    """The codec's name when ``encoding`` lacks characters (not a UTF), else None."""
    try:
        name = codecs.lookup(encoding).name
    except LookupError:  # an encoding Python does not know cannot be written to either
        return None
    return None if name.startswith("utf") else name


def _stdout_encoding() -> str | None:
    # While a turn's live region is drawn, sys.stdout is Rich's proxy of the real one.
    stdout = getattr(sys.stdout, "rich_proxied_file", sys.stdout)
    return _narrow(getattr(stdout, "encoding", None) or "utf-8")


def carried(text: str) -> str:
    """``text`` as stdout's encoding can carry it (unchanged on UTF-8; see the module)."""
    encoding = _stdout_encoding()
    if encoding is None:
        return text
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, _SHOWN).decode(encoding)
    return text


def carries(text: str) -> bool:
    """True when stdout's encoding has every character of ``text``."""
    return carried(text) == text


@contextlib.contextmanager
def tolerant_output() -> Iterator[None]:
    """Within the block, stdout and stderr replace a character their encoding lacks."""
    changed: list[tuple[io.TextIOWrapper[Any], str | None]] = []
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and _narrow(stream.encoding) is not None:
            changed.append((stream, stream.errors))
            stream.reconfigure(errors=_STREAMED)
    try:
        yield
    finally:
        for stream, errors in changed:
            with contextlib.suppress(ValueError, OSError):  # closed, or its terminal gone
                stream.reconfigure(errors=errors)
