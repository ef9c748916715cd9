"""Workflow-level evidence for the ranker: BM25, character n-grams and sibling contrast.

The lexical matcher scores each text of a workflow on its own. This index looks at a
workflow as one document (all its texts together), which gives two things the per-text score
lacks:

* **BM25** with workflow-level IDF: a word every sibling shares ("DDR" in five DDR
  workflows) weighs little, the action that tells them apart ("approve", "import") weighs a
  lot;
* **character 3-5-gram TF-IDF cosine**: forgiving of typos, inflections and compounds the
  stemmer and the typo map miss. A workflow's vector is divided by its *pivoted* length
  (Singhal, Buckley and Mitra, 1996), not its own: a plain cosine favours short workflows,
  whose few grams each weigh a lot, so a catalog of terse near-duplicates ("review a quote
  for q1") outranks the one workflow that describes the task at length.

**Sibling contrast.** Among a message's candidates, two workflows are siblings when they
share most of their rare terms (the same object). A workflow's *distinctive* terms are those
its siblings lack; the contrast feature is the share of the message's weight that falls on a
candidate's distinctive terms, minus the best sibling's share. It tells "start a new DDR"
from "approve the DDR" by the action alone.

Every per-candidate feature is computed with array operations over the candidates (a message
has a few dozen); the workflows' n-gram vectors are built once with the catalog, as sorted
``(workflow, gram)`` keys, so a query never re-tokenises a workflow.
"""

from __future__ import annotations

import functools
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
#: A workflow's n-gram vector is divided by ``(1 - slope) * average + slope * its own`` length.
PIVOT_SLOPE = 0.2
#: Two candidates are siblings when this share of the smaller one's term weight is shared.
SIBLING_OVERLAP = 0.3

Vector = dict[str, float]
Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


def char_ngrams(text: str) -> Counter[str]:
    """Character 3-5-grams of each normalised word, padded with spaces at both ends."""
    grams: list[str] = []
    for word in normalise(text).split():
        grams += _word_ngrams(word)
    return Counter(grams)


@functools.lru_cache(maxsize=65_536)
def _word_ngrams(word: str) -> tuple[str, ...]:
    # Messages repeat their words: each word is cut into grams once.
    padded = f" {word} "
    return tuple(
        padded[i : i + size] for size in NGRAM_SIZES for i in range(len(padded) - size + 1)
    )


def _log_tf(count: int) -> float:
    """``1 + ln(count)``, the n-gram weight of a count (small counts from a table)."""
    return _LOG_TF[count] if count < len(_LOG_TF) else 1.0 + math.log(count)


# math.log, as the catalog side computes its weights: the very same floats.
_LOG_TF = [0.0] + [1.0 + math.log(n) for n in range(1, 64)]


class WorkflowIndex:
    """BM25 and character n-gram vectors over whole workflows; rebuilt with the catalog."""

    def __init__(self) -> None:
        self._owners: list[str] = []
        self._position: dict[str, int] = {}
        self._lengths: Floats = np.zeros(0)
        self._average = 1.0
        self._idf: dict[str, float] = {}
        self._postings: dict[str, tuple[NDArray[np.intp], Floats]] = {}
        self._gram_idf: dict[str, float] = {}
        self._gram_ids: dict[str, int] = {}
        #: Unit TF-IDF n-gram weights of every workflow by ascending gram id: workflow ``i``'s
        #: are ``_gram_values[_gram_starts[i]:_gram_starts[i + 1]]``, of grams ``_gram_cols``.
        self._gram_cols: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self._gram_values: Floats = np.zeros(0)
        self._gram_starts: Ints = np.zeros(1, dtype=np.int64)
        self._term_ids: dict[str, int] = {}
        self._term_idf: Floats = np.zeros(0)
        #: Each workflow's distinct term ids, ``_term_rows[_term_starts[i]:_term_starts[i+1]]``.
        self._term_rows: Ints = np.zeros(0, dtype=np.int64)
        self._term_starts: Ints = np.zeros(1, dtype=np.int64)

    def build(self, texts: Mapping[str, Sequence[str]], terms: Mapping[str, list[str]]) -> None:
        """Index each workflow's texts (``texts``) and content terms (``terms``, with repeats)."""
        self._owners = sorted(texts)
        self._position = {owner: i for i, owner in enumerate(self._owners)}
        counted = [Counter(terms.get(owner, [])) for owner in self._owners]
        count = len(self._owners)
        self._lengths = np.asarray([sum(t.values()) for t in counted], dtype=np.float64)
        self._average = float(self._lengths.mean()) if count else 1.0
        df: Counter[str] = Counter()
        for counts in counted:
            df.update(counts.keys())
        self._idf = {t: math.log(1.0 + (count - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        self._build_postings(counted)
        self._build_terms(counted)
        self._build_grams([" ".join(texts[owner]) for owner in self._owners])

    def _build_postings(self, counted: list[Counter[str]]) -> None:
        rows: dict[str, list[int]] = defaultdict(list)
        freqs: dict[str, list[float]] = defaultdict(list)
        for i, counts in enumerate(counted):
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

    def _build_terms(self, counted: list[Counter[str]]) -> None:
        self._term_ids = {t: i for i, t in enumerate(self._idf)}
        self._term_idf = np.asarray(list(self._idf.values()), dtype=np.float64)
        rows = [sorted(self._term_ids[t] for t in counts) for counts in counted]
        self._term_rows = np.asarray([t for row in rows for t in row], dtype=np.int64)
        self._term_starts = np.cumsum([0, *map(len, rows)], dtype=np.int64)

    def _build_grams(self, joined: list[str]) -> None:
        per_workflow = [char_ngrams(text) for text in joined]
        gram_df: Counter[str] = Counter()
        for grams in per_workflow:
            gram_df.update(grams.keys())
        count = len(joined)
        self._gram_idf = {g: math.log((count + 1) / (n + 1)) + 1.0 for g, n in gram_df.items()}
        self._gram_ids = {g: i for i, g in enumerate(self._gram_idf)}
        idf = np.asarray(list(self._gram_idf.values()), dtype=np.float64)
        most = max((max(g.values()) for g in per_workflow if g), default=1)
        # math.log, not np.log, so that every weight is the very float the query side computes.
        log_tf = np.asarray([0.0] + [1.0 + math.log(n) for n in range(1, most + 1)])
        cols: list[Ints] = []
        weights: list[Floats] = []
        norms: list[float] = []
        for grams in per_workflow:
            if not grams:
                continue
            ids = np.fromiter((self._gram_ids[g] for g in grams), np.int64, len(grams))
            tf = np.fromiter(grams.values(), np.int64, len(grams))
            weight = log_tf[tf] * idf[ids]
            # Python's sequential sum, as the message side's unit vector is computed.
            norms.append(math.sqrt(sum((weight * weight).tolist())))
            order = np.argsort(ids)
            cols.append(ids[order].astype(np.int32))
            weights.append(weight[order])
        average = math.fsum(norms) / len(norms) if norms else 1.0
        values = [
            w / ((1.0 - PIVOT_SLOPE) * average + PIVOT_SLOPE * n)
            for w, n in zip(weights, norms, strict=True)
        ]
        self._gram_cols = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int32)
        self._gram_values = np.concatenate(values) if values else np.zeros(0)
        self._gram_starts = np.cumsum([0, *(len(g) for g in per_workflow)], dtype=np.int64)

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
        hit = np.flatnonzero(scores != 0)  # a mask is scanned faster than floats
        if not len(hit) or total <= 0:
            return {}
        if len(hit) > limit:
            hit = hit[np.argpartition(-scores[hit], limit - 1)[:limit]]
        return {self._owners[i]: float(scores[i] / total) for i in hit.tolist()}

    def bm25_of(self, query: Mapping[str, float], owners: Sequence[str]) -> Floats:
        """BM25 of the named workflows (0 for unknown ones), scaled as :meth:`bm25`."""
        out = np.zeros(len(owners))
        total = sum(self._idf.get(t, 0.0) * (BM25_K1 + 1.0) * s for t, s in query.items())
        if total <= 0:
            return out
        rows, known = self._rows(owners)
        for term, strength in query.items():
            found = self._postings.get(term)
            if found is None:
                continue
            where, weight = found
            at = np.minimum(np.searchsorted(where, rows), len(where) - 1)
            hit = known & (where[at] == rows)
            # Added term by term in the query's order: the same sums as one owner at a time.
            out += np.where(hit, weight[at] * strength, 0.0)
        return out / total

    def query_grams(self, message: str) -> Vector:
        """The message's TF-IDF character n-gram vector (unit length; unknown grams dropped)."""
        idf = self._gram_idf
        return _unit({g: _log_tf(n) * idf[g] for g, n in char_ngrams(message).items() if g in idf})

    def char_cosine(self, query: Vector, owners: Sequence[str]) -> Floats:
        """Pivoted cosine between the message's n-gram vector and each named workflow's."""
        if not query or not owners:
            return np.zeros(len(owners))
        owner_of, at_rows = self._segments(self._gram_starts, owners)
        if not len(at_rows):
            return np.zeros(len(owners))
        # Only the candidates' own grams are searched: a few thousand entries, not millions.
        width = len(self._gram_ids)
        local = owner_of * width + self._gram_cols[at_rows]
        ids = np.asarray([self._gram_ids.get(g, -1) for g in query], dtype=np.int64)
        weights = np.asarray(list(query.values()), dtype=np.float64)
        keys = np.arange(len(owners))[:, None] * width + ids[None, :]
        at = np.minimum(np.searchsorted(local, keys), len(local) - 1)
        hit = (local[at] == keys) & (ids >= 0)[None, :]
        products = np.where(hit, self._gram_values[at_rows[at]] * weights[None, :], 0.0)
        # A running sum in the query's order: the same floats as a Python sum over its grams.
        out: Floats = np.cumsum(products, axis=1)[:, -1]
        return out

    def contrast(self, query: Mapping[str, float], owners: Sequence[str]) -> Floats:
        """Sibling contrast per candidate: its distinctive share minus its best sibling's."""
        weight = {t: self._idf.get(t, 0.0) * s for t, s in query.items()}
        total = sum(weight.values())
        out = np.zeros(len(owners))
        if total <= 0 or not owners:
            return out
        has, columns = self._incidence(owners)
        sets = has.astype(np.float64)
        idf = self._term_idf[columns]
        sizes = np.einsum("ij,j->i", sets, idf)
        shared = np.einsum("ij,kj->ik", sets * idf, sets)
        smaller = np.minimum(sizes[:, None], sizes[None, :])
        with np.errstate(divide="ignore", invalid="ignore"):
            close = shared / smaller >= SIBLING_OVERLAP
        # Term weights are positive: an empty set makes ``smaller`` 0, which is never a sibling.
        siblings: NDArray[np.bool_] = (smaller > 0) & close
        np.fill_diagonal(siblings, False)
        if not len(columns):
            return out
        # Owners x query terms: which of the message's terms each candidate (and a sibling) has.
        ids = np.asarray([self._term_ids.get(t, -1) for t in weight], dtype=np.int64)
        at = np.minimum(np.searchsorted(columns, ids), len(columns) - 1)
        mine = has[:, at] & (columns[at] == ids)[None, :]
        others = (siblings[:, :, None] & mine[None, :, :]).any(axis=1)
        weights = np.asarray(list(weight.values()), dtype=np.float64)
        # A running sum in the query's order: the same floats as a Python sum over its terms.
        share = np.cumsum(np.where(mine & ~others, weights[None, :], 0.0), axis=1)[:, -1] / total
        any_sibling = siblings.any(axis=1)
        best = np.where(siblings, share[None, :], -np.inf).max(axis=1, initial=-np.inf)
        out[any_sibling] = share[any_sibling] - best[any_sibling]
        return out

    def _rows(self, owners: Sequence[str]) -> tuple[Ints, NDArray[np.bool_]]:
        """Each owner's row (0 for unknown ones) and whether it is known."""
        found = [self._position.get(o, -1) for o in owners]
        rows = np.asarray(found, dtype=np.int64)
        return np.maximum(rows, 0), rows >= 0

    def _segments(self, starts: Ints, owners: Sequence[str]) -> tuple[Ints, Ints]:
        """For each entry of the owners' segments (``starts`` per row): owner, position."""
        rows, known = self._rows(owners)
        begin = starts[rows]
        lengths = np.where(known, starts[rows + 1] - begin, 0)
        owner_of = np.repeat(np.arange(len(owners)), lengths)
        offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return owner_of, np.repeat(begin, lengths) + offsets

    def _incidence(self, owners: Sequence[str]) -> tuple[NDArray[np.bool_], Ints]:
        """Owners x their terms (sorted term ids): which terms each owner's texts hold."""
        owner_of, at_rows = self._segments(self._term_starts, owners)
        columns, local = np.unique(self._term_rows[at_rows], return_inverse=True)
        has = np.zeros((len(owners), len(columns)), dtype=np.bool_)
        has[owner_of, local] = True
        return has, columns

    def __len__(self) -> int:
        return len(self._owners)


def _unit(vector: Vector) -> Vector:
    norm = math.sqrt(sum(w * w for w in vector.values()))
    return {g: w / norm for g, w in vector.items()} if norm else {}
