"""The lexical matcher: an inverted index over stemmed terms, then rapidfuzz on the best few.

Scoring a document (an intent pattern, a title or a description) against a message:

* ``coverage`` - the IDF-weighted share of the document's terms found in the message
  (typos are forgiven: an unknown message word is mapped to the closest indexed term when
  rapidfuzz rates them at least ``TYPO_CUTOFF``, for a message's first
  ``MAX_TYPO_LOOKUPS`` unknown terms);
* ``precision`` - the IDF-weighted share of the message's terms found in the document;
* ``fuzzy`` - rapidfuzz's ratio between the two stemmed texts;
* a whole intent pattern found verbatim in the message scores at least ``PHRASE_SCORE``.

``score = weight * (0.6 coverage + 0.25 precision + 0.15 fuzzy)``, in [0, 1]. A workflow
scores as its best document.
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from rapidfuzz import fuzz, process

from aptix.workflows.matching.bounded import BoundedCache, new_number, text_bytes
from aptix.workflows.matching.scratch import ScratchPool
from aptix.workflows.matching.text import MAX_CACHED_WORD, STOPWORDS, normalise, term_of, terms
from aptix.workflows.matching.topk import largest

__all__ = ["LexicalMatcher", "MatchDocument"]

TYPO_CUTOFF = 84.0
#: Shorter terms are never read as typos of an indexed one.
MIN_TYPO_LENGTH = 5
#: Typo lookups per message at most (:meth:`LexicalMatcher._mapped`).
MAX_TYPO_LOOKUPS = 32
PHRASE_SCORE = 0.9
SINGLE_TERM_FACTOR = 0.7
#: Documents rescored with rapidfuzz after the index has ranked them.
RESCORE_LIMIT = 64
#: Typo lookups remembered, every index's together: 16 MB as measured (the term, the answer
#: and :data:`.bounded.ENTRY_BYTES`), about 36,000 lookups of terms of up to 20 characters.
KNOWN_CACHE_BYTES = 16 * 1024 * 1024
#: What a remembered lookup's answer takes: a pair of the indexed term (the index's own
#: string) and a float.
_ANSWER_BYTES = 56 + 24
#: Messages' query terms remembered, every index's together: 4 MB as measured (the message,
#: its terms' table and :data:`.bounded.ENTRY_BYTES`).
QUERY_CACHE_BYTES = 4 * 1024 * 1024


#: Typo lookups made against every index of the process (a message is analysed several
#: times), by (the index build's number, term): one cache, whatever the number of orgs.
_KNOWN: BoundedCache[tuple[int, str], tuple[str, float] | None] = BoundedCache(KNOWN_CACHE_BYTES)
#: Recent messages' query terms by (the index build's number, message): matching reads them
#: more than once per message.
_QUERIES: BoundedCache[tuple[int, str], dict[str, float]] = BoundedCache(QUERY_CACHE_BYTES)
#: Not looked up yet (None is an answer: not a typo of any indexed term).
_UNKNOWN: tuple[str, float] = ("", -1.0)


@dataclass(frozen=True, slots=True)
class MatchDocument:
    """One piece of text describing a workflow, with how much a hit on it counts."""

    owner: str
    text: str
    weight: float = 1.0
    #: ``pattern`` (an intent pattern), ``title`` or ``description``.
    kind: str = "pattern"


#: A text as the index reads it: its normal form, that form padded with a space at both ends,
#: its terms, and its terms sorted and joined.
Analysis = tuple[str, str, frozenset[str], str]


def analyse(text: str) -> Analysis:
    """:data:`Analysis` of ``text``."""
    phrase = normalise(text)
    found = frozenset(terms(text))
    return phrase, f" {phrase} ", found, " ".join(sorted(found))


class LexicalMatcher:
    """Ranks workflows for a message without any model; rebuilt when the catalog changes."""

    def __init__(self, documents: Sequence[MatchDocument] = ()) -> None:
        self._owners: list[str] = []
        self._weights: list[float] = []
        self._terms: list[frozenset[str]] = []
        self._stemmed: list[str] = []
        self._phrases: list[str] = []
        #: Each phrase with a space at both ends, to find it as whole words in a message.
        self._padded: list[str] = []
        self._norms: list[float] = []
        self._idf: dict[str, float] = {}
        self._postings: dict[str, NDArray[np.intp]] = {}
        self._norm_array: NDArray[np.float64] = np.zeros(0)
        self._by_initial: dict[str, list[str]] = {}
        self._termless: list[int] = []
        self._owner_terms: dict[str, frozenset[str]] = {}
        self._weight_array: NDArray[np.float64] = np.zeros(0)
        #: This build's entries in the process's typo lookups and query terms (:data:`_KNOWN`,
        #: :data:`_QUERIES`).
        self._number = new_number()
        #: Per-document scratch arrays for :meth:`_accumulated`.
        self._hits = ScratchPool(0, np.float64)
        self._shared = ScratchPool(0, np.int32)
        #: Each text's analysis, for an index that extends this one; None once it does.
        self._lendable: dict[str, Analysis] | None = None
        self.build(documents)

    def build(
        self, documents: Sequence[MatchDocument], extends: LexicalMatcher | None = None
    ) -> None:
        """Index ``documents`` (replacing what was indexed before).

        With ``extends`` (the deployment-wide index, for an org's), a text that index holds
        is read from its analysis, the same objects rather than equal copies.
        """
        lender = {} if extends is None else (extends._lendable or {})
        analysed = [lender.get(d.text) or analyse(d.text) for d in documents]
        self._owners = [d.owner for d in documents]
        self._weights = [d.weight for d in documents]
        self._phrases = [a[0] for a in analysed]
        self._padded = [a[1] for a in analysed]
        self._terms = [a[2] for a in analysed]
        self._stemmed = [a[3] for a in analysed]
        postings: dict[str, list[int]] = defaultdict(list)
        for doc, doc_terms in enumerate(self._terms):
            for term in doc_terms:
                postings[term].append(doc)
        self._postings = {t: np.asarray(p, dtype=np.intp) for t, p in postings.items()}
        count = len(documents)
        self._idf = {t: math.log((count + 1) / (len(p) + 0.5)) + 0.1 for t, p in postings.items()}
        # Summed in sorted order: a frozenset's order follows the hash seed, and the norms
        # feed fitted weights that should not change with it in the last bits.
        self._norms = [sum(self._idf[t] for t in sorted(doc_terms)) for doc_terms in self._terms]
        self._norm_array = np.asarray([n or 1.0 for n in self._norms], dtype=np.float64)
        self._weight_array = np.asarray(self._weights, dtype=np.float64)
        self._number = new_number()
        self._hits = ScratchPool(len(documents), np.float64)
        self._shared = ScratchPool(len(documents), np.int32)
        initials: dict[str, list[str]] = defaultdict(list)
        for term in sorted(self._idf):
            initials[term[0]].append(term)
        self._by_initial = dict(initials)
        self._termless = [i for i, t in enumerate(self._terms) if not t and self._phrases[i]]
        owner_terms: dict[str, set[str]] = defaultdict(set)
        for owner, doc_terms in zip(self._owners, self._terms, strict=True):
            owner_terms[owner] |= doc_terms
        lent = {} if extends is None else extends._owner_terms
        self._owner_terms = {o: _same(lent.get(o), t) for o, t in owner_terms.items()}
        self._lendable = (
            None
            if extends is not None
            else {d.text: a for d, a in zip(documents, analysed, strict=True)}
        )

    def __len__(self) -> int:
        return len(self._owners)

    def match(self, message: str, limit: int = 10) -> list[tuple[str, float]]:
        """The ``limit`` best ``(owner, score)`` pairs, best first, scores in [0, 1]."""
        query = self._query_terms(message)
        phrase = normalise(message)
        pairs: list[tuple[float, str]] = []
        if query:
            with self._accumulated(query) as (hits, shared, found):
                if len(found) > RESCORE_LIMIT:
                    # Rank by coverage with vectorised arithmetic; rescore only the best few.
                    coverage = hits[found] / self._norm_array[found]
                    found = found[largest(coverage, RESCORE_LIMIT)]
                query_norm = sum(query.values()) or 1.0
                if len(found):
                    scores = self._scores(found, hits, shared, query, query_norm, f" {phrase} ")
                    owners = self._owners
                    pairs = [
                        (score, owners[doc])
                        for doc, score in zip(found.tolist(), scores.tolist(), strict=True)
                    ]
        for doc in self._termless:
            pairs.append((self._termless_score(doc, phrase), self._owners[doc]))
        # Best first, ties by owner (descending): each owner's first pair is its best document.
        pairs.sort(reverse=True)
        best: dict[str, float] = {}
        for score, owner in pairs:
            if len(best) == limit or score <= 0.0:
                break
            best.setdefault(owner, score)
        return list(best.items())

    def shared_terms(self, message: str, owner: str) -> list[str]:
        """The message's words (typos forgiven) found in ``owner``'s texts, in message order."""
        known = self._owner_terms.get(owner, frozenset())
        mapped = self._mapped(terms(message))
        shared: list[str] = []
        for word in normalise(message).split():
            if word in STOPWORDS or word in shared:
                continue
            found = mapped[term_of(word)]
            if found is not None and found[0] in known:
                shared.append(word)
        return shared

    def query_terms(self, message: str) -> dict[str, float]:
        """The message's indexed terms (typos mapped) with how sure each mapping is."""
        return self._query_terms(message)

    def owner_terms(self) -> dict[str, list[str]]:
        """Each owner's content terms over all its documents, with repeats."""
        out: dict[str, list[str]] = defaultdict(list)
        for owner, doc_terms in zip(self._owners, self._terms, strict=True):
            out[owner].extend(sorted(doc_terms))
        return dict(out)

    def known_share(self, message: str) -> float:
        """Share of the message's content words the index knows (typos forgiven)."""
        words = terms(message)
        if not words:
            return 0.0
        mapped = self._mapped(words)
        return sum(mapped[t] is not None for t in words) / len(words)

    def _query_terms(self, message: str) -> dict[str, float]:
        key = (self._number, message)
        cached = _QUERIES.get(key)
        if cached is not None:
            return dict(cached)
        query: dict[str, float] = {}
        words = terms(message)
        mapped = self._mapped(words)
        for term in words:
            found = mapped[term]
            if found is not None:
                query[found[0]] = max(query.get(found[0], 0.0), found[1])
        kept = dict(query)
        # The terms are the index's own strings; each strength is a float of its own.
        _QUERIES.put(key, kept, text_bytes(message) + sys.getsizeof(kept) + 24 * len(kept))
        return query

    def _mapped(self, message_terms: list[str]) -> dict[str, tuple[str, float] | None]:
        """Each of a message's terms with the indexed term it stands for, or None.

        Only the first :data:`MAX_TYPO_LOOKUPS` distinct terms the index lacks are looked up
        as typos (:meth:`_typo_of`), in message order, whatever was looked up before: a pasted
        page of words the catalog never uses costs a few dozen lookups, not hundreds.
        """
        mapped: dict[str, tuple[str, float] | None] = {}
        lookups = 0
        for term in message_terms:
            if term in mapped:
                continue
            if term in self._idf:
                mapped[term] = (term, 1.0)
            elif len(term) < MIN_TYPO_LENGTH or lookups == MAX_TYPO_LOOKUPS:
                mapped[term] = None
            else:
                lookups += 1
                mapped[term] = self._typo_of(term)
        return mapped

    def _typo_of(self, term: str) -> tuple[str, float] | None:
        """The indexed term an unknown ``term`` is a typo of, with how sure that is (< 1.0)."""
        # Longer terms (identifiers, encoded data) seldom repeat: looked up each time.
        remember = len(term) <= MAX_CACHED_WORD
        key = (self._number, term)
        if remember:
            kept = _KNOWN.get(key, _UNKNOWN)
            if kept is not _UNKNOWN:
                return kept
        found = process.extractOne(
            term,
            self._by_initial.get(term[0], ()),
            scorer=fuzz.ratio,
            score_cutoff=TYPO_CUTOFF,
        )
        known = None if found is None else (found[0], found[1] / 100.0)
        if remember:
            _KNOWN.put(key, known, text_bytes(term) + (0 if known is None else _ANSWER_BYTES))
        return known

    @contextlib.contextmanager
    def _accumulated(
        self, query: dict[str, float]
    ) -> Iterator[tuple[NDArray[np.float64], NDArray[np.int32], NDArray[np.intp]]]:
        """Per document: IDF-weighted hits, how many query terms it holds; the documents hit.

        Hits are added term by term in the query's order. The arrays are scratch
        (:mod:`.scratch`): valid inside the block only.
        """
        with self._hits.borrow() as hits, self._shared.borrow() as shared:
            for term, strength in query.items():
                # A term occurs at most once per posting list, so fancy-index += is exact.
                at = self._postings[term]
                hits[at] += self._idf[term] * strength
                shared[at] += 1
            found = np.flatnonzero(shared > 0)  # a mask is scanned faster than numbers
            yield hits, shared, found
            hits[found] = 0.0
            shared[found] = 0

    def _scores(
        self,
        docs: NDArray[np.intp],
        hits: NDArray[np.float64],
        shared: NDArray[np.int32],
        query: dict[str, float],
        query_norm: float,
        padded: str,
    ) -> NDArray[np.float64]:
        """Each document's score; elementwise, the arithmetic of one document at a time."""
        hit = hits[docs]
        coverage = np.minimum(1.0, hit / self._norm_array[docs])
        precision = np.minimum(1.0, hit / query_norm)
        stemmed = [self._stemmed[doc] for doc in docs.tolist()]
        ratio = process.cdist(
            stemmed, [" ".join(sorted(query))], scorer=fuzz.ratio, dtype=np.float64, workers=1
        )[:, 0]
        score = 0.6 * coverage + 0.25 * precision + 0.15 * (ratio / 100.0)
        # One shared word is weak evidence unless it is all the message says.
        listed = docs.tolist()
        score = np.where((shared[docs] < 2) & (precision < 0.99), score * SINGLE_TERM_FACTOR, score)
        # A message that holds a document's whole phrase holds each of its terms, each at full
        # strength: coverage is 1 but for rounding. Only those documents are searched for.
        for k in np.flatnonzero(coverage > 0.999).tolist():
            if self._padded[listed[k]] in padded:
                score[k] = max(score[k], PHRASE_SCORE + 0.1 * precision[k])
        out: NDArray[np.float64] = np.minimum(1.0, score * self._weight_array[docs])
        return out

    def _termless_score(self, doc: int, phrase: str) -> float:
        # Patterns made only of common words ("what can you do") match as whole phrases.
        text = self._phrases[doc]
        if phrase == text:
            return self._weights[doc]
        if re.search(rf"\b{re.escape(text)}\b", phrase):
            return PHRASE_SCORE * self._weights[doc]
        return 0.0


def _same(kept: frozenset[str] | None, found: set[str]) -> frozenset[str]:
    """``kept`` when it holds just ``found`` (one object shared, not an equal copy)."""
    return kept if kept is not None and kept == found else frozenset(found)
