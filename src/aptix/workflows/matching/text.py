"""Text normalisation for lexical matching: tokens, stop words, synonyms and a light stemmer."""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["STOPWORDS", "normalise", "stem", "term_of", "terms"]

_TOKEN = re.compile(r"[a-z0-9]+")

_STOPWORD_TEXT = """
a about above after again all am an and any are as at be been before being below between
both but by can could did do does doing down during each few for from further had has have
having he her here hers him his how i if in into is it its itself just let lets like me
might more most must my myself no nor not now of off on once only or other our ours out over
own please same shall she should so some such than that the their theirs them then there
these they this those through to too under until up us very via want wanna was we were what
when where which while who whom why will with would you your yours yourself i'd i'm id im ok
okay hi hey thanks thank need needs would'nt could get got go going gonna also really one
can't cant dont don't something someone anything thing things kindly
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# A small thesaurus of the verbs people use for the same intent, so that "make a workflow"
# and "create a workflow" meet. Applied after stemming; values are stems too.
_SYNONYMS = {
    "make": "creat",
    "build": "creat",
    "writ": "creat",
    "author": "creat",
    "defin": "creat",
    "begin": "start",
    "launch": "start",
    "kick": "start",
    "initi": "start",
    "run": "start",
    "delet": "remov",
    "eras": "remov",
    "drop": "remov",
    "show": "list",
    "displai": "list",
    "view": "list",
    "see": "list",
    "enumer": "list",
    "switch": "chang",
    "swap": "chang",
    "modifi": "chang",
    "alter": "chang",
    "edit": "updat",
    "revis": "updat",
    "comput": "calcul",
    "calculator": "calcul",
    "math": "calcul",
    "arithmet": "calcul",
    "sum": "calcul",
    "releas": "publish",
    "ship": "publish",
    "help": "assist",
    "support": "assist",
    "greet": "hello",
    "welcom": "hello",
    "hi": "hello",
}

_SUFFIXES = (
    ("ational", "ate"),
    ("ization", "ize"),
    ("fulness", "ful"),
    ("iveness", "ive"),
    ("ations", "ate"),
    ("ation", "ate"),
    ("itions", ""),
    ("ition", ""),
    ("ments", ""),
    ("ment", ""),
    ("ness", ""),
    ("ings", ""),
    ("ing", ""),
    ("ies", "y"),
    ("ied", "y"),
    ("ers", ""),
    ("er", ""),
    ("ed", ""),
    ("ly", ""),
    ("es", ""),
    ("s", ""),
)


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """A conservative suffix-stripping stemmer (enough to meet plurals and verb forms)."""
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix, replacement in _SUFFIXES:
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            break
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + replacement
            break
    # Fold the endings the table leaves behind so "create"/"created"/"creating" meet.
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "aeiousl":
        word = word[:-1]  # "running" -> "runn" -> "run"
    if word.endswith("y") and len(word) > 4:
        word = word[:-1] + "i"
    if word.endswith("at") and len(word) > 6:
        word = word[:-2]  # "calculat" -> "calcul", matches "calculus"-free stems
    return word


def normalise(text: str) -> str:
    """Lowercase, strip accents, separate words (``snake_case`` and ``kebab-case`` split)."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(_TOKEN.findall(text.casefold().replace("'", "")))


def term_of(word: str) -> str:
    """The index term of one normalised word: stemmed, synonyms folded."""
    stemmed = stem(word)
    return _SYNONYMS.get(stemmed, stemmed)


def terms(text: str) -> list[str]:
    """The content terms of ``text``: stop words removed, stemmed, synonyms folded."""
    return [term_of(word) for word in normalise(text).split() if word not in STOPWORDS]
