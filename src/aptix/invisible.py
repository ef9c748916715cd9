r"""Characters that change what text shows without showing themselves, and how they are shown.

Three kinds, all spelled out as ``<U+XXXX>`` by :func:`aptix.cli.output.inert` (and escaped as
``\uXXXX`` by :func:`aptix.cli.output.print_json`):

- **Line and paragraph separators** (U+2028, U+2029). A terminal draws nothing for them, so
  ``"line\u2028FORGED"`` reads ``lineFORGED``, while a reader that splits lines by Unicode's
  rules (``str.splitlines()``, JavaScript before ES2019) sees a line break. JSON may hold them
  raw; :func:`~aptix.cli.output.print_json` writes ``\u2028``, the same data.
- **Bidirectional controls** (U+202E and its kin) reorder what is shown ("Trojan Source":
  ``"\u202Egnp.exe"`` reads as ``exe.png``).
- **Invisible format characters** (Unicode category Cf): zero-width space, word joiner, soft
  hyphen, the byte order mark, zero-width (non-)joiners, the invisible operators and the tag
  characters U+E0000-E007F. They draw nothing, so ``"dev"`` followed by tag characters that
  spell ``" and also drop prod"`` reads ``dev`` to a person while a model reads the rest
  ("ASCII smuggling"), and ``"pro\u200bd"`` reads ``prod`` but is not it.

Legitimate text keeps the few of them it needs, where they do what they are for:

- a zero-width joiner between two emoji (woman, ZWJ, laptop: one picture, "woman
  technologist", not two);
- a zero-width joiner or non-joiner between two letters of a script that shapes with them
  (Arabic, Persian, Syriac, the Indic scripts, Myanmar, Khmer, Mongolian): Persian writes
  ``"\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"`` with a ZWNJ;
- a zero-width joiner after an Indic virama, whatever follows: Malayalam's old-style word
  endings (consonant, virama, ZWJ) put it last in the word;
- the Mongolian vowel separator between two Mongolian letters;
- tag characters in a flag's emoji tag sequence (black flag, 3 to 6 tag letters or digits,
  CANCEL TAG: the flag of Scotland is U+1F3F4 + the tags spelling ``gbsct`` + U+E007F).

Anywhere else (a joiner inside a Latin word, a tag run after ``dev``) they are spelled out.
The prepended concatenation marks (U+0600-0605, U+06DD...) are Cf but drawn as signs: left as
they are. The console's ``dom.js`` (``visible()``) applies the same rules to the page, and
:mod:`aptix.log_setup` to log lines, which write them as escapes (``\u200b``, and
``\U000e0061`` in plain text where JSON has the pair ``\udb40\udc61``).

``inert`` keeps newlines, for text that has lines of its own (a reply, a tool result). In a
one-line diagnostic (a workflow file's problem) a line break would start a line that the file
writes ("All 7 workflows are valid."), so :func:`on_one_line` shows it the way ``inert`` shows
the other controls: LF as ``␊``, CR as ``␍``, U+2028 as ``<U+2028>``.
"""

from __future__ import annotations

import json
import re

__all__ = [
    "BIDI",
    "FORMAT",
    "JSON_UNSAFE",
    "KEPT",
    "LINE_BREAKS",
    "SEPARATORS",
    "SHOWN",
    "escaped",
    "on_one_line",
    "spelled_out",
]

#: The line and paragraph separators.
SEPARATORS = "\u2028\u2029"
#: What ends a line: on a terminal (LF, VT, FF, CR), or to a reader that splits lines by
#: Unicode's rules (``str.splitlines()`` also splits at FS, GS, RS, NEL and the separators).
LINE_BREAKS = "\n\v\f\r\x1c\x1d\x1e\x85" + SEPARATORS
#: Bidirectional controls.
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
#: Invisible format characters (Cf) other than the bidi controls and the visible marks.
FORMAT = (
    "\u00ad\u180e\u200b-\u200d\u2060-\u2064\u206a-\u206f\ufeff\ufff9-\ufffb"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
#: Emoji a zero-width joiner may join (Extended_Pictographic, in broad ranges).
_PICTOGRAPHIC = (
    "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u2bff\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
#: Scripts whose letters join or break with ZWJ / ZWNJ: Arabic to Mandaic, the Indic scripts,
#: Tibetan, Myanmar, Khmer, Mongolian, and the Arabic presentation forms.
_JOINING = (
    "\u0600-\u08ff\u0900-\u0dff\u0f00-\u0fff\u1000-\u109f\u1780-\u18af\ua8e0-\ua8ff"
    "\ufb50-\ufdff\ufe70-\ufefe"
)
#: The Indic viramas, after which a ZWJ asks for a half form or a chillu.
_VIRAMAS = "\u094d\u09cd\u0a4d\u0acd\u0b4d\u0bcd\u0c4d\u0ccd\u0d4d\u0dca"
#: The sequences legitimate text keeps (a regular expression): the exceptions listed above.
KEPT = (
    # A subdivision flag's tags: 3 to 6 lowercase letters or digits, too few for a sentence.
    "\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{3,6}\U000e007f"
    f"|(?<=[{_PICTOGRAPHIC}\ufe0f])\u200d(?=[{_PICTOGRAPHIC}])"
    f"|(?<=[{_JOINING}])[\u200c\u200d](?=[{_JOINING}])"
    # After a virama whatever follows: Malayalam's old-style chillu (consonant, virama, ZWJ)
    # ends a word, so a space or a full stop follows its joiner.
    f"|(?<=[{_VIRAMAS}])\u200d"
    # The Mongolian vowel separator, between a consonant and a final a or e.
    "|(?<=[\u1820-\u18aa])\u180e(?=[\u1820-\u18aa])"
)
#: A sequence legitimate text keeps (group 1), or one character to spell out.
SHOWN = re.compile(f"({KEPT})|[{SEPARATORS}{BIDI}{FORMAT}]")
#: As :data:`SHOWN`, and the C1 controls and DEL, which JSON text may hold unescaped.
JSON_UNSAFE = re.compile(f"({KEPT})|[\u007f-\u009f{SEPARATORS}{BIDI}{FORMAT}]")


def spelled_out(match: re.Match[str]) -> str:
    """A :data:`SHOWN` match as it is shown: a kept sequence as it is, a character as <U+XXXX>."""
    if match.group(1):
        return match.group(1)
    return f"<U+{ord(match.group()):04X}>"


def escaped(match: re.Match[str]) -> str:
    """A :data:`JSON_UNSAFE` match in JSON: a kept sequence as it is, a character escaped."""
    if match.group(1):
        return match.group(1)
    return json.dumps(match.group())[1:-1]  # \\uXXXX, a surrogate pair beyond the BMP


#: Each line break as it is shown: a C0 control as its Control Picture, the others as <U+XXXX>.
_SHOWN_BREAKS = {
    ord(c): chr(0x2400 + ord(c)) if c < " " else f"<U+{ord(c):04X}>" for c in LINE_BREAKS
}


def on_one_line(text: str) -> str:
    """``text`` with every line break shown, never made (LF as ``␊``), so it stays one line.

    CR LF is two characters here (``␍␊``): a file name or an id holds it as data, not as a
    line ending.
    """
    return text.translate(_SHOWN_BREAKS)
