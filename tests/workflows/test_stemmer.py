"""The stemmer: PyStemmer's C build, giving the pure-Python Snowball stemmer's very stems."""

from __future__ import annotations

import re
from pathlib import Path

from snowballstemmer.english_stemmer import EnglishStemmer

from aptix.workflows.matching import text
from aptix.workflows.matching.text import stem

MATCHSET = Path(__file__).parent / "matchset"
VOCABULARY = Path(text.__file__).parent / "data"


def _words() -> set[str]:
    """Every word of the training and held-out sets and of the encoder's vocabulary."""
    words: set[str] = set()
    for path in [*MATCHSET.rglob("*.yaml"), *VOCABULARY.rglob("*.txt")]:
        words |= set(re.findall(r"[a-z0-9]+", path.read_text(encoding="utf-8").lower()))
    return words


def test_the_compiled_stemmer_is_in_use() -> None:
    # snowballstemmer hands out PyStemmer's stemmer when the dependency is installed.
    assert type(text._STEMMER).__module__ == "Stemmer"


def test_stems_equal_the_pure_python_snowball_stemmer() -> None:
    reference = EnglishStemmer()
    words = _words()
    assert len(words) > 20_000
    irregular = {"wrote", "written", "ran", "made", "built"}
    differ = [
        w
        for w in sorted(words - irregular)
        if len(w) > 3 and not w.isdigit() and stem(w) != reference.stemWord(w)
    ]
    assert differ == []
