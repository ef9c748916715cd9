"""Text normalisation for lexical matching: tokens, stop words, synonyms and a stemmer."""

from __future__ import annotations

import functools
import re
import unicodedata

import snowballstemmer

__all__ = ["STOPWORDS", "forget", "normalise", "readable", "stem", "term_of", "terms"]

_TOKEN = re.compile(r"[a-z0-9]+")

# ECMA-48 control sequences, 7-bit (ESC ...) and 8-bit (C1): CSI with its parameters; OSC, DCS,
# SOS, PM and APC strings up to their terminator (or the end, when there is none: negated
# classes keep this linear); any other escape. What is left of C0 and C1 becomes a space.
_CONTROL_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Invisible format characters (soft hyphen, zero-width space and joiners, bidi controls, BOM)
# show as nothing, so "cre<ZWSP>ate" reads "create".
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")

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
    "write": "creat",
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
    "display": "list",
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

# PyStemmer's C build of the same algorithm when installed (a dependency), the pure-Python one
# otherwise: the stems are the same, a new word's over ten times faster.
_STEMMER = snowballstemmer.stemmer("english")
#: Irregular verb forms the Snowball stemmer leaves alone, folded onto their stems.
_IRREGULAR = {"wrote": "write", "written": "write", "ran": "run", "made": "make", "built": "build"}


#: Words up to this long are remembered by the stem and n-gram caches (65,536 words each).
#: Longer ones (identifiers, encoded data) seldom repeat, and a cache of them took up to
#: 366 KB a word for n-grams (the 2,000 characters a matched message keeps, one word), so a
#: client's messages could fill it with gigabytes (docs/deployment.md).
MAX_CACHED_WORD = 20


def stem(word: str) -> str:
    """The English Snowball (Porter 2) stem of one lowercase word."""
    return (_cached_stem if len(word) <= MAX_CACHED_WORD else _stem)(word)


def _stem(word: str) -> str:
    irregular = _IRREGULAR.get(word)
    if irregular is not None:
        return irregular
    if len(word) <= 3 or word.isdigit():
        return word
    return str(_STEMMER.stemWord(word))


def readable(text: str) -> str:
    r"""``text`` as a terminal shows it: escape sequences and invisibles dropped, controls spaced.

    ``"\x1b[31mred\x1b[0m"`` reads ``"red"``: the parameters of a colour code are not words
    (``31mred`` would otherwise look like a number to calculate with).
    """
    if text.isprintable():
        return text
    return _CONTROL.sub(" ", _INVISIBLE.sub("", _CONTROL_SEQUENCE.sub("", text)))


#: Texts up to this long (a matched message's longest) keep their normal form and terms.
MAX_CACHED_LENGTH = 2_000


def normalise(text: str) -> str:
    """Lowercase, strip accents, separate words (``snake_case`` and ``kebab-case`` split)."""
    return (_normalised if len(text) <= MAX_CACHED_LENGTH else _normalise)(text)


def _normalise(text: str) -> str:
    if not text.isascii():
        # ASCII text is its own NFKD form and holds no combining marks.
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(_TOKEN.findall(text.casefold().replace("'", "")))


def term_of(word: str) -> str:
    """The index term of one normalised word: stemmed, synonyms folded."""
    stemmed = stem(word)
    return _SYNONYMS.get(stemmed, stemmed)


def terms(text: str) -> list[str]:
    """The content terms of ``text``: stop words removed, stemmed, synonyms folded."""
    return list((_cached_terms if len(text) <= MAX_CACHED_LENGTH else _terms)(text))


def _terms(text: str) -> tuple[str, ...]:
    return tuple(term_of(word) for word in normalise(text).split() if word not in STOPWORDS)


# A message is read by each of the matcher's parts (its normal form eight times or more, its
# terms three or four): both are remembered for texts a message can be.
_normalised = functools.lru_cache(maxsize=1_024)(_normalise)
_cached_terms = functools.lru_cache(maxsize=1_024)(_terms)
_cached_stem = functools.lru_cache(maxsize=65_536)(_stem)


def forget() -> None:
    """Empty the stem, normal-form and term caches (benchmarks time text as if new)."""
    _cached_stem.cache_clear()
    _normalised.cache_clear()
    _cached_terms.cache_clear()
