"""The vectorised evidence equals the per-candidate arithmetic it replaced, float for float."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from aptix.workflows.matching.evidence import BM25_K1, SIBLING_OVERLAP, WorkflowIndex, char_ngrams
from aptix.workflows.matching.lexical import LexicalMatcher, MatchDocument
from aptix.workflows.matching.semantic import SemanticMatcher
from tests.workflows.test_matching import HashingEmbedder

DOCUMENTS = [
    MatchDocument("ddr_new", "start a new decision record"),
    MatchDocument("ddr_new", "New DDR", kind="title"),
    MatchDocument("ddr_approve", "approve the decision record"),
    MatchDocument("ddr_approve", "Approve a DDR", kind="title"),
    MatchDocument("ddr_import", "import decision records from a wiki page"),
    MatchDocument("invoice", "create an invoice for a customer"),
    MatchDocument("invoice", "Invoicing", kind="title"),
    MatchDocument("invoice", "Bills a customer for work done.", kind="description"),
    MatchDocument("travel", "book a flight to the conference"),
]
MESSAGES = [
    "please approve the DDR about caching",
    "new decision record on rate limits",
    "invoice the customer for the flight",
    "aprove the decison record",
    "nothing in common here",
]


def _index() -> tuple[WorkflowIndex, LexicalMatcher]:
    lexical = LexicalMatcher(DOCUMENTS)
    texts: dict[str, list[str]] = {}
    for doc in DOCUMENTS:
        texts.setdefault(doc.owner, []).append(doc.text)
    index = WorkflowIndex()
    index.build(texts, lexical.owner_terms())
    return index, lexical


def _reference_cosine(
    index: WorkflowIndex, query: dict[str, float], owners: Sequence[str]
) -> list[float]:
    out = []
    for owner in owners:
        texts = " ".join(d.text for d in DOCUMENTS if d.owner == owner)
        grams = {g: (1.0 + math.log(n)) * index._gram_idf[g] for g, n in char_ngrams(texts).items()}
        norm = math.sqrt(sum(w * w for w in grams.values()))
        unit = {g: w / norm for g, w in grams.items()}
        out.append(sum(w * unit.get(g, 0.0) for g, w in query.items()))
    return out


def test_ngram_cosine_and_bm25_equal_the_per_candidate_sums() -> None:
    index, lexical = _index()
    owners = ["ddr_approve", "ddr_import", "ddr_new", "invoice", "travel", "unknown"]
    for message in MESSAGES:
        grams = index.query_grams(message)
        expected = [*_reference_cosine(index, grams, owners[:-1]), 0.0]
        assert index.char_cosine(grams, owners).tolist() == expected
        query = lexical.query_terms(message)
        total = sum(index._idf.get(t, 0.0) * (BM25_K1 + 1.0) * s for t, s in query.items())
        wanted = []
        for owner in owners:
            score = 0.0
            for term, strength in query.items():
                where, weight = index._postings.get(term, (np.zeros(0, dtype=np.intp), None))
                row = index._position.get(owner, -1)
                if weight is not None and row in where.tolist():
                    score += float(weight[where.tolist().index(row)]) * strength
            wanted.append(score / total if total > 0 else 0.0)
        assert index.bm25_of(query, owners).tolist() == wanted


def test_sibling_contrast_tells_the_action_apart() -> None:
    index, lexical = _index()
    owners = ["ddr_approve", "ddr_import", "ddr_new", "invoice"]
    query = lexical.query_terms("please approve the DDR")
    contrast = index.contrast(query, owners)
    # The three DDR workflows are siblings; only "approve" is distinctive, and it is
    # ddr_approve's. The invoice shares nothing and has no sibling.
    terms = {o: set(lexical.owner_terms()[o]) for o in owners}
    idf = index._idf
    assert sum(idf[t] for t in terms["ddr_approve"] & terms["ddr_new"]) >= SIBLING_OVERLAP * min(
        sum(idf[t] for t in terms["ddr_approve"]), sum(idf[t] for t in terms["ddr_new"])
    )
    assert contrast[0] > 0 > contrast[2]
    assert contrast[3] == 0.0
    assert index.contrast({}, owners).tolist() == [0.0] * 4


def test_semantic_evidence_equals_one_owner_at_a_time() -> None:
    matcher = SemanticMatcher(HashingEmbedder(), DOCUMENTS)
    owners = ["travel", "unknown", "ddr_new", "invoice", "ddr_import"]
    for message in MESSAGES:
        got = matcher.evidence(message, owners)
        query = matcher.embed_query(message)
        for k, owner in enumerate(owners):
            docs = [d for d in sorted(DOCUMENTS, key=lambda d: d.owner) if d.owner == owner]
            if not docs:
                assert got[k].tolist() == [0.0] * 4
                continue
            sims = np.einsum(
                "ij,j->i", matcher.embedder.encode([d.text for d in docs]), query
            ).astype(np.float64)
            kinds = np.asarray([d.kind == "pattern" for d in docs])
            assert got[k, 0] == (sims[kinds].max() if kinds.any() else sims.max())
            assert got[k, 1] == (sims[~kinds].max() if (~kinds).any() else sims.max())
            assert got[k, 2] == np.sort(sims)[-2:].mean()


def test_a_prefetched_message_is_encoded_once() -> None:
    embedder = HashingEmbedder()
    matcher = SemanticMatcher(embedder, DOCUMENTS)
    before = len(embedder.batches)
    matcher.prefetch("book a flight")
    matcher.prefetch("book a flight")
    vector = matcher.embed_query("book a flight")
    assert matcher.embed_query("book a flight") is vector
    assert embedder.batches[before:] == [["book a flight"]]
    assert np.array_equal(vector, embedder.encode(["book a flight"])[0])


def test_typo_lookups_do_not_outlive_a_rebuild() -> None:
    matcher = LexicalMatcher([MatchDocument("docs", "publish the documentation")])
    assert matcher.query_terms("documantation") == {"document": 0.875}
    matcher.build([MatchDocument("reports", "write the sales report")])
    assert matcher.query_terms("documantation") == {}
    assert matcher.match("documantation") == []
