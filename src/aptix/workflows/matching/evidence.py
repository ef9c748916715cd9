"""Workflow-level evidence for the ranker: BM25, character n-grams and sibling contrast.

The lexical matcher scores each text of a workflow on its own. This index looks at a
workflow as one document (all its texts together), which gives two things the per-text score
lacks:

* **BM25** with workflow-level IDF: a word every sibling shares ("DDR" in five DDR
  workflows) weighs little, the action that tells them apart ("approve", "import") weighs a
  lot;
* **character 3-5-gram TF-IDF cosine**: forgiving of typos, inflections and compounds the
  stemmer and the typo map miss.

**Sibling contrast.** Among a message's candidates, two workflows are siblings when they
share most of their rare terms (the same object). A workflow's *distinctive* terms are those
its siblings lack; the contrast feature is the share of the message's weight that falls on a
candidate's distinctive terms, minus the best sibling's share. It tells "start a new DDR"
from "approve the DDR" by the action alone.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from aptix.workflows.matching.text import normalise

__all__ = ["WorkflowIndex", "char_ngrams"]

BM25_K1 = 1.2
BM25_B = 0.75
NGRAM_SIZES = (3, 4, 5)
#: Two candidates are siblings when this share of the smaller one's term weight is shared.
SIBLING_OVERLAP = 0.3

Vector = dict[str, float]


def char_ngrams(text: str) -> Counter[str]:
    """Character 3-5-grams of each normalised word, padded with spaces at both ends."""
    grams: Counter[str] = Counter()
    for word in normalise(text).split():
        padded = f" {word} "
        for size in NGRAM_SIZES:
            grams.update(padded[i : i + size] for i in range(len(padded) - size + 1))
    return grams


class WorkflowIndex:
    """BM25 and character n-gram vectors over whole workflows; rebuilt with the catalog."""

    def __init__(self) -> None:
        self._owners: list[str] = []
        self._position: dict[str, int] = {}
        self._terms: list[Counter[str]] = []
        self._lengths: NDArray[np.float64] = np.zeros(0)
        self._average = 1.0
        self._idf: dict[str, float] = {}
        self._postings: dict[str, tuple[NDArray[np.intp], NDArray[np.float64]]] = {}
        self._gram_idf: dict[str, float] = {}
        self._texts: list[str] = []
        self._gram_cache: dict[int, Vector] = {}

    def build(self, texts: Mapping[str, Sequence[str]], terms: Mapping[str, list[str]]) -> None:
        """Index each workflow's texts (``texts``) and content terms (``terms``, with repeats)."""
        self._owners = sorted(texts)
        self._position = {owner: i for i, owner in enumerate(self._owners)}
        self._terms = [Counter(terms.get(owner, [])) for owner in self._owners]
        self._texts = [" ".join(texts[owner]) for owner in self._owners]
        count = len(self._owners)
        self._lengths = np.asarray([sum(t.values()) for t in self._terms], dtype=np.float64)
        self._average = float(self._lengths.mean()) if count else 1.0
        df: Counter[str] = Counter()
        for counts in self._terms:
            df.update(counts.keys())
        self._idf = {t: math.log(1.0 + (count - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        rows: dict[str, list[int]] = defaultdict(list)
        freqs: dict[str, list[float]] = defaultdict(list)
        for i, counts in enumerate(self._terms):
            for term, tf in counts.items():
                rows[term].append(i)
                freqs[term].append(float(tf))
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * self._lengths / (self._average or 1.0))
        self._postings = {}
        for term, owners in rows.items():
            where = np.asarray(owners, dtype=np.intp)
            freq = np.asarray(freqs[term])
            weight = self._idf[term] * freq * (BM25_K1 + 1.0) / (freq + norm[where])
            self._postings[term] = (where, weight)
        gram_df: Counter[str] = Counter()
        for text in self._texts:
            gram_df.update(char_ngrams(text).keys())
        self._gram_idf = {g: math.log((count + 1) / (n + 1)) + 1.0 for g, n in gram_df.items()}
        self._gram_cache = {}

    def bm25(self, query: Mapping[str, float], limit: int) -> dict[str, float]:
        """The ``limit`` best workflows by BM25, scaled into [0, 1] by the query's weight."""
        if not self._owners or not query:
            return {}
        scores = np.zeros(len(self._owners))
        total = 0.0
        for term, strength in query.items():
            found = self._postings.get(term)
            if found is None:
                continue
            scores[found[0]] += found[1] * strength
            total += self._idf[term] * (BM25_K1 + 1.0) * strength
        hit = np.flatnonzero(scores)
        if not len(hit) or total <= 0:
            return {}
        if len(hit) > limit:
            hit = hit[np.argpartition(-scores[hit], limit - 1)[:limit]]
        return {self._owners[i]: float(scores[i] / total) for i in hit.tolist()}

    def bm25_of(self, query: Mapping[str, float], owners: Sequence[str]) -> NDArray[np.float64]:
        """BM25 of the named workflows (0 for unknown ones), scaled as :meth:`bm25`."""
        out = np.zeros(len(owners))
        total = sum(self._idf.get(t, 0.0) * (BM25_K1 + 1.0) * s for t, s in query.items())
        if total <= 0:
            return out
        for k, owner in enumerate(owners):
            i = self._position.get(owner)
            if i is None:
                continue
            for term, strength in query.items():
                found = self._postings.get(term)
                if found is None:
                    continue
                where = np.searchsorted(found[0], i)
                if where < len(found[0]) and found[0][where] == i:
                    out[k] += float(found[1][where]) * strength
        return out / total

    def query_grams(self, message: str) -> Vector:
        """The message's TF-IDF character n-gram vector (unit length; unknown grams dropped)."""
        return _unit(
            {
                g: (1.0 + math.log(n)) * self._gram_idf[g]
                for g, n in char_ngrams(message).items()
                if g in self._gram_idf
            }
        )

    def char_cosine(self, query: Vector, owners: Sequence[str]) -> NDArray[np.float64]:
        """Cosine between the message's n-gram vector and each named workflow's."""
        out = np.zeros(len(owners))
        for k, owner in enumerate(owners):
            i = self._position.get(owner)
            if i is None or not query:
                continue
            vector = self._grams(i)
            out[k] = sum(w * vector.get(g, 0.0) for g, w in query.items())
        return out

    def _grams(self, i: int) -> Vector:
        # Workflow vectors are computed on first use: a query touches a few dozen candidates,
        # and holding 10,000 workflows' vectors would cost hundreds of megabytes.
        cached = self._gram_cache.get(i)
        if cached is None:
            grams = char_ngrams(self._texts[i])
            cached = _unit({g: (1.0 + math.log(n)) * self._gram_idf[g] for g, n in grams.items()})
            if len(self._gram_cache) > 4096:
                self._gram_cache.clear()
            self._gram_cache[i] = cached
        return cached

    def contrast(self, query: Mapping[str, float], owners: Sequence[str]) -> NDArray[np.float64]:
        """Sibling contrast per candidate: its distinctive share minus its best sibling's."""
        sets = [
            set(self._terms[i]) if (i := self._position.get(o)) is not None else set()
            for o in owners
        ]
        weight = {t: self._idf.get(t, 0.0) * s for t, s in query.items()}
        total = sum(weight.values())
        out = np.zeros(len(owners))
        if total <= 0:
            return out
        siblings = [
            [j for j in range(len(owners)) if j != k and self._siblings(sets[k], sets[j])]
            for k in range(len(owners))
        ]
        share = np.zeros(len(owners))
        for k, mine in enumerate(sets):
            others: set[str] = (
                set().union(*(sets[j] for j in siblings[k])) if siblings[k] else set()
            )
            share[k] = sum(w for t, w in weight.items() if t in mine and t not in others) / total
        for k in range(len(owners)):
            if siblings[k]:
                out[k] = share[k] - max(share[j] for j in siblings[k])
        return out

    def _siblings(self, a: set[str], b: set[str]) -> bool:
        if not a or not b:
            return False
        shared = sum(self._idf.get(t, 0.0) for t in a & b)
        smaller = min(sum(self._idf.get(t, 0.0) for t in a), sum(self._idf.get(t, 0.0) for t in b))
        return smaller > 0 and shared / smaller >= SIBLING_OVERLAP

    def __len__(self) -> int:
        return len(self._owners)


def _unit(vector: Vector) -> Vector:
    norm = math.sqrt(sum(w * w for w in vector.values()))
    return {g: w / norm for g, w in vector.items()} if norm else {}
