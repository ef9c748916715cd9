r"""What counts as blank text, said once so the OpenAPI schema, pydantic and the reasoner agree.

``\S`` means three different things here: ECMAScript regexes (JSON Schema validators and
schemathesis) leave out ``U+001C..U+001F`` and ``U+0085``, Rust's (pydantic) leaves out the
first four, and Python's ``str.strip()`` removes all of them but not ``U+FEFF``. Blank text is
therefore spelled out: a character any of them calls whitespace.
"""

from __future__ import annotations

__all__ = ["BLANK_CHARACTERS", "NOT_BLANK_PATTERN", "strip_blank"]

#: Whitespace by Python (``str.isspace``), ECMAScript (``\s``) or Unicode (White_Space).
BLANK_CHARACTERS = (
    "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
#: A JSON Schema ``pattern`` matching text that has at least one non-blank character.
NOT_BLANK_PATTERN = f"[^{BLANK_CHARACTERS}]"


def strip_blank(text: str) -> str:
    """``text`` without leading and trailing blank characters."""
    return text.strip(BLANK_CHARACTERS)
