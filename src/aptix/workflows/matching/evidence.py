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
has a few dozen); the workflows' n-gram vectors are built once with the catalog, one row of
sorted gram ids and weights per workflow, so a query never re-tokenises a workflow. BM25 is
computed for every workflow once per message, then read for the candidates.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from aptix.workflows.matching.associations import Associations
from aptix.workflows.matching.bounded import BoundedCache, new_number, text_bytes
from aptix.workflows.matching.scratch import ScratchPool
from aptix.workflows.matching.text import MAX_CACHED_WORD, normalise
from aptix.workflows.matching.topk import largest

__all__ = ["WorkflowIndex", "char_ngrams"]

BM25_K1 = 1.2
BM25_B = 0.75
NGRAM_SIZES = (3, 4, 5)
#: A workflow's n-gram vector is divided by ``(1 - slope) * average + slope * its own`` length.
PIVOT_SLOPE = 0.2
#: Two candidates are siblings when this share of the smaller one's term weight is shared.
SIBLING_OVERLAP = 0.3
#: Message terms' associations kept, every index's together: 16 MB as measured (the term,
#: its two tables and :data:`.bounded.ENTRY_BYTES`); the least recently used term leaves first.
ASSOCIATION_CACHE_BYTES = 16 * 1024 * 1024
#: An empty table, and what each item adds to one (an int key, a float, its slot).
_TABLE_BYTES, _ITEM_BYTES = 64, 100

Vector = dict[str, float]
Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


def char_ngrams(text: str) -> Counter[str]:
    """Character 3-5-grams of each normalised word, padded with spaces at both ends."""
    grams: list[str] = []
    for word in normalise(text).split():
        grams += (_cached_ngrams if len(word) <= MAX_CACHED_WORD else _word_ngrams)(word)
    return Counter(grams)


def _word_ngrams(word: str) -> tuple[str, ...]:
    padded = f" {word} "
    return tuple(
        padded[i : i + size] for size in NGRAM_SIZES for i in range(len(padded) - size + 1)
    )


# Messages repeat their words: each word is cut into grams once (a long one each time).
_cached_ngrams = functools.lru_cache(maxsize=65_536)(_word_ngrams)

#: A message term's word associations by term id, and its best association with each
#: workflow row asked about so far, by (the index build's number, term), for every index of
#: the process: one cache, whatever the number of orgs.
_TERMS: BoundedCache[tuple[int, str], tuple[dict[int, float], dict[int, float]]] = BoundedCache(
    ASSOCIATION_CACHE_BYTES
)


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
        self._gram_starts: list[int] = [0]
        #: A message's n-gram weights by gram id, scratch for :meth:`char_cosine`.
        self._dense = ScratchPool(0, np.float64)
        self._term_ids: dict[str, int] = {}
        self._term_idf: Floats = np.zeros(0)
        #: Each workflow's distinct term ids, ascending.
        self._term_lists: list[tuple[int, ...]] = []
        #: Each workflow's distinct terms, for the word associations.
        self._term_sets: list[frozenset[str]] = []
        #: Each workflow's term set, for an index that extends this one; None once it does.
        self._lendable: dict[str, frozenset[str]] | None = None
        #: This build's entries in the process's association cache (:data:`_TERMS`).
        self._number = new_number()

    def build(
        self,
        texts: Mapping[str, Sequence[str]],
        terms: Mapping[str, list[str]],
        extends: WorkflowIndex | None = None,
    ) -> None:
        """Index each workflow's texts (``texts``) and content terms (``terms``, with repeats).

        With ``extends`` (the deployment-wide index, for an org's), a workflow's term set
        that index holds as it is is that index's object, not an equal copy.
        """
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
        self._build_terms(counted, extends)
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

    def _build_terms(self, counted: list[Counter[str]], extends: WorkflowIndex | None) -> None:
        self._term_ids = {t: i for i, t in enumerate(self._idf)}
        self._term_idf = np.asarray(list(self._idf.values()), dtype=np.float64)
        self._term_lists = [tuple(sorted(self._term_ids[t] for t in counts)) for counts in counted]
        self._term_sets = [frozenset(counts) for counts in counted]
        lent = None if extends is None else extends._lendable
        if lent is not None:
            for i, owner in enumerate(self._owners):
                kept = lent.get(owner)
                if kept is not None and kept == self._term_sets[i]:
                    self._term_sets[i] = kept
        # One attribute, set last: an org's build may read it while this index rebuilds.
        self._lendable = (
            None if extends is not None else dict(zip(self._owners, self._term_sets, strict=True))
        )
        self._number = new_number()

    def associations(
        self, model: Associations, message_terms: Iterable[str], owners: Sequence[str]
    ) -> Floats:
        """:meth:`.Associations.scores` of the named workflows, read through this catalog.

        A message term's associations are looked up by term id once, and its best with a
        workflow is worked out the first time that workflow is a candidate for it: a
        message costs one lookup per term and candidate once its terms have been seen, and a
        term never seen costs a walk over the candidates' terms only, not over the catalog.
        Both are kept in the process's cache (:data:`_TERMS`) while the catalog stands. The
        cache assumes one ``model`` per index (its matcher's).
        """
        tables = []
        for term in dict.fromkeys(message_terms):
            key = (self._number, term)
            kept = _TERMS.get(key) if len(term) <= MAX_CACHED_WORD else None
            if kept is None:
                ids = self._term_ids
                links = {
                    i: a
                    for w, a in model.rows.get(term, {}).items()
                    if (i := ids.get(w)) is not None
                }
                kept = (links, {})
                # Longer terms (identifiers, encoded data) seldom repeat: read each time.
                if len(term) <= MAX_CACHED_WORD:
                    size = text_bytes(term) + 2 * _TABLE_BYTES + _ITEM_BYTES * len(links)
                    _TERMS.put(key, kept, size)
            if kept[0]:
                tables.append((key, *kept))
        out = [0.0] * len(owners)
        if tables:
            lists = self._term_lists
            added = [0] * len(tables)
            for k, owner in enumerate(owners):
                row = self._position.get(owner, -1)
                if row < 0:
                    continue
                total = 0.0
                for t, (_, links, best) in enumerate(tables):
                    value = best.get(row)
                    if value is None:
                        value = max((links[i] for i in lists[row] if i in links), default=0.0)
                        best[row] = value
                        added[t] += 1
                    total += value
                out[k] = total
            for (key, _, _), count in zip(tables, added, strict=True):
                if count:
                    _TERMS.grew(key, _ITEM_BYTES * count)
        return np.asarray(out, dtype=np.float64)

    def terms_of(self, owners: Sequence[str]) -> list[frozenset[str]]:
        """Each owner's distinct content terms (none for an unknown owner)."""
        position, sets = self._position, self._term_sets
        return [sets[position[o]] if o in position else frozenset() for o in owners]

    def _build_grams(self, joined: list[str]) -> None:
        per_workflow = [char_ngrams(text) for text in joined]
        gram_df: Counter[str] = Counter()
        for grams in per_workflow:
            gram_df.update(grams.keys())
        count = len(joined)
        self._gram_idf = {g: math.log((count + 1) / (n + 1)) + 1.0 for g, n in gram_df.items()}
        self._gram_ids = {g: i for i, g in enumerate(self._gram_idf)}
        self._dense = ScratchPool(len(self._gram_ids), np.float64)
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
        self._gram_starts = list(itertools.accumulate((len(g) for g in per_workflow), initial=0))

    def bm25(self, query: Mapping[str, float]) -> Floats:
        """Every workflow's BM25 (in the index's order), scaled into [0, 1] by the query's weight.

        Added term by term in the query's order: the same sums as one workflow at a time.
        """
        scores = np.zeros(len(self._owners))
        total = 0.0
        for term, strength in query.items():
            found = self._postings.get(term)
            if found is None:
                continue
            scores[found[0]] += found[1] * strength
            total += self._idf[term] * (BM25_K1 + 1.0) * strength
        if total <= 0:
            return np.zeros(len(self._owners))
        out: Floats = scores / total
        return out

    def top(self, scores: Floats, limit: int) -> dict[str, float]:
        """The ``limit`` best workflows of ``scores`` (from :meth:`bm25`) with a score above 0."""
        hit = np.flatnonzero(scores > 0)
        if len(hit) > limit:
            hit = hit[largest(scores[hit], limit)]
        return {self._owners[i]: float(scores[i]) for i in hit.tolist()}

    def select(self, scores: Floats, owners: Sequence[str]) -> Floats:
        """The named workflows' entries of ``scores`` (from :meth:`bm25`; 0 for unknown ones)."""
        rows, known = self._rows(owners)
        out: Floats = np.where(known, scores[rows], 0.0)
        return out

    def query_grams(self, message: str) -> Vector:
        """The message's TF-IDF character n-gram vector (unit length; unknown grams dropped)."""
        idf, log_tf, small = self._gram_idf, _LOG_TF, len(_LOG_TF)
        # 1 + ln(count), small counts from a table: this runs for every gram of every message.
        return _unit(
            {
                g: (log_tf[n] if n < small else 1.0 + math.log(n)) * idf[g]
                for g, n in char_ngrams(message).items()
                if g in idf
            }
        )

    def char_cosine(self, query: Vector, owners: Sequence[str]) -> Floats:
        """Pivoted cosine between the message's n-gram vector and each named workflow's.

        ``query`` is :meth:`query_grams`'s vector: it holds only grams the index knows.
        """
        if not query or not owners:
            return np.zeros(len(owners))
        # Only the candidates' own grams are read: a few thousand entries, not millions.
        position, starts = self._position, self._gram_starts
        spans = [(starts[r], starts[r + 1]) for o in owners if (r := position.get(o, -1)) >= 0]
        lengths = [end - begin for begin, end in spans]
        if not sum(lengths):
            return np.zeros(len(owners))
        cols = np.concatenate([self._gram_cols[begin:end] for begin, end in spans])
        values = np.concatenate([self._gram_values[begin:end] for begin, end in spans])
        ids = [self._gram_ids[g] for g in query]
        with self._dense.borrow() as dense:
            dense[ids] = list(query.values())
            products = values * dense[cols]
            dense[ids] = 0.0
        known = [i for i, o in enumerate(owners) if o in position]
        owner_of = np.repeat(known, lengths)
        out = np.bincount(owner_of, weights=products, minlength=len(owners))
        return out.astype(np.float64, copy=False)

    def contrast(self, query: Mapping[str, float], owners: Sequence[str]) -> Floats:
        """Sibling contrast per candidate: its distinctive share minus its best sibling's."""
        weight = {t: self._idf.get(t, 0.0) * s for t, s in query.items()}
        total = sum(weight.values())
        count = len(owners)
        out = np.zeros(count)
        if total <= 0 or not owners:
            return out
        # Owners x the terms any of them has: a few dozen columns, built from Python lists
        # (a handful of numpy calls on arrays this small cost more than the arithmetic).
        position, lists = self._position, self._term_lists
        held = [lists[position[o]] if o in position else () for o in owners]
        columns = sorted(set().union(*held))
        if not columns:
            return out
        column = {t: j for j, t in enumerate(columns)}
        width = len(columns)
        flat = np.zeros(count * width, dtype=np.bool_)
        flat[[i * width + column[t] for i, terms in enumerate(held) for t in terms]] = True
        has = flat.reshape(count, width)
        sets = has.astype(np.float64)
        weighted = sets * self._term_idf[columns]
        sizes = weighted.sum(axis=1)
        shared = weighted @ sets.T
        # Term weights are positive: an empty set makes ``smaller`` 0 and shares nothing, so
        # its overlap is 0 (never a sibling); any other size is at least one term's IDF.
        smaller = np.maximum(np.minimum.outer(sizes, sizes), 1e-300)
        siblings: NDArray[np.bool_] = shared / smaller >= SIBLING_OVERLAP
        siblings.flat[:: count + 1] = False
        # Candidates x the message's terms that any candidate has, in the query's order.
        asked = [
            (column[j], w) for t, w in weight.items() if (j := self._term_ids.get(t, -1)) in column
        ]
        if not asked:
            return out
        mine = has[:, [j for j, _ in asked]]
        others = siblings @ mine
        weights = np.asarray([w for _, w in asked], dtype=np.float64)
        # A running sum in the query's order: the same floats as a Python sum over its terms.
        share = np.cumsum(np.where(mine > others, weights, 0.0), axis=1)[:, -1] / total
        best = np.where(siblings, share, -np.inf).max(axis=1)
        contrast: Floats = np.where(siblings.any(axis=1), share - best, 0.0)
        return contrast

    def _rows(self, owners: Sequence[str]) -> tuple[Ints, NDArray[np.bool_]]:
        """Each owner's row (0 for unknown ones) and whether it is known."""
        found = [self._position.get(o, -1) for o in owners]
        rows = np.asarray(found, dtype=np.int64)
        return np.maximum(rows, 0), rows >= 0

    def __len__(self) -> int:
        return len(self._owners)


def _unit(vector: Vector) -> Vector:
    norm = math.sqrt(sum(w * w for w in vector.values()))
    return {g: w / norm for g, w in vector.items()} if norm else {}
