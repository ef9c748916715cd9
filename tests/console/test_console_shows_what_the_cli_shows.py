"""The console's ``visible()`` (dom.js) shows outside text exactly as the CLI's ``inert()`` does.

Both spell out controls, bidi controls and invisible format characters (review r7 F3: tag
characters, zero-width characters, soft hyphens and byte order marks reached approval cards
unmarked) and keep the few that legitimate text needs. Two copies of one rule drift apart;
this runs dom.js in Chromium on the same strings as the Python.
"""

from __future__ import annotations

from playwright.sync_api import Browser

from aptix.cli.output import inert
from aptix.console import STATIC_DIR

TAGS = "".join(chr(0xE0000 + ord(c)) for c in " and also drop prod")
FLAG = "\U0001f3f4" + "".join(chr(0xE0000 + ord(c)) for c in "gbsct") + "\U000e007f"
TEXTS = [
    # Hostile: each hides or reorders text.
    "dev" + TAGS + "\u200b\u2060\u00ad",
    "pro\u200bd pro\u200cd pro\u200dd \ufeffBOM \u2062x \u206aold \ufff9note\ufffb",
    "\U0001f3f4" + TAGS + "\U000e007f",  # a "flag" whose tags spell a sentence
    "\U0001f3f4\U000e0067\U000e0062\U000e007f",  # too few tags for a flag
    "\u200d\U0001f4bb lone joiner, emoji then joiner\U0001f469\u200d",
    "a\u200db\u0645\u200c x",  # ZWJ in Latin; ZWNJ after Arabic but before a space
    "invoice\u202egnp.exe\u202c \u2066x\u2069 \u200fy \u061cz",
    "\x1b[2J\x9b31m\u0085\r\nline\ttab\rcr\x7f\x00",
    "\U000e0001\U0001bca0\U0001d173\U00013430",
    "line\u2028FORGED\u2029paragraph",  # separators a terminal draws nothing for
    # Legitimate: kept as written.
    "\U0001f469\u200d\U0001f4bb \U0001f3f3\ufe0f\u200d\U0001f308",
    "\U0001f9d4\U0001f3fb\u200d\u2642\ufe0f",
    FLAG,
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: ZWNJ between letters
    "\u0915\u094d\u200d\u0937",  # Devanagari: ZWJ after a virama
    "\u0d28\u0d4d\u200d \u0d35\u0d28\u0d4d\u0d28\u0d41.",  # Malayalam: a word-final chillu
    "\u1828\u1822\u180e\u1821",  # Mongolian vowel separator
    "\u0600\u0661\u0662 \u06dd",  # prepended concatenation marks: drawn, not hidden
    "plain text, ünïcödé, 中文, emoji \U0001f600",
]


def test_visible_in_the_page_matches_inert_in_the_terminal(browser: Browser) -> None:
    source = (STATIC_DIR / "js" / "dom.js").read_text(encoding="utf-8")
    page = browser.new_page()
    try:
        shown = page.evaluate(
            """async ([source, texts]) => {
              const url = "data:text/javascript;charset=utf-8," + encodeURIComponent(source);
              const dom = await import(url);
              return texts.map((text) => dom.visible(text));
            }""",
            [source, TEXTS],
        )
    finally:
        page.close()
    assert shown == [inert(text) for text in TEXTS]
