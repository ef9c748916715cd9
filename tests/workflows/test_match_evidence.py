"""The vectorised evidence equals the per-candidate arithmetic it replaced.

BM25 and the contrast are equal float for float; the n-gram cosine adds its products in the
workflow's gram order, not the message's, so it is equal up to the last bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from aptix.workflows.matching.evidence import (
    BM25_K1,
    PIVOT_SLOPE,
    SIBLING_OVERLAP,
    WorkflowIndex,
    char_ngrams,
)
from aptix.workflows.matching.lexical import LexicalMatcher, MatchDocument
from aptix.workflows.matching.semantic import (
    BUILD_CHUNK,
    BatchTokenEmbedder,
    Encoded,
    OnnxEmbedder,
    SemanticMatcher,
    load_embedder,
)
from aptix.workflows.matching.text import STOPWORDS, terms
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


def _weights_of(index: WorkflowIndex, text: str) -> dict[str, float]:
    return {g: (1.0 + math.log(n)) * index._gram_idf[g] for g, n in char_ngrams(text).items()}


def _gram_weights(index: WorkflowIndex, owner: str) -> dict[str, float]:
    return _weights_of(index, " ".join(d.text for d in DOCUMENTS if d.owner == owner))


def _norm(weights: dict[str, float]) -> float:
    return math.sqrt(sum(w * w for w in weights.values()))


def _reference_cosine(
    index: WorkflowIndex, query: dict[str, float], owners: Sequence[str]
) -> list[float]:
    everyone = sorted({d.owner for d in DOCUMENTS})
    average = math.fsum(_norm(_gram_weights(index, o)) for o in everyone) / len(everyone)
    out = []
    for owner in owners:
        grams = _gram_weights(index, owner)
        pivoted = (1.0 - PIVOT_SLOPE) * average + PIVOT_SLOPE * _norm(grams)
        scaled = {g: x / pivoted for g, x in grams.items()}
        out.append(sum(w * scaled.get(g, 0.0) for g, w in query.items()))
    return out


def test_ngram_cosine_and_bm25_equal_the_per_candidate_sums() -> None:
    index, lexical = _index()
    owners = ["ddr_approve", "ddr_import", "ddr_new", "invoice", "travel", "unknown"]
    for message in MESSAGES:
        grams = index.query_grams(message)
        expected = [*_reference_cosine(index, grams, owners[:-1]), 0.0]
        assert index.char_cosine(grams, owners).tolist() == pytest.approx(expected, rel=1e-12)
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
        assert index.select(index.bm25(query), owners).tolist() == wanted


def test_pivoting_shrinks_the_lead_of_terse_near_duplicates() -> None:
    # A plain cosine favours the terse workflows: their few grams each weigh a lot, so one
    # shared word ("review") scores three times what it does in the workflow that describes
    # the task at length.
    long_text = (
        "review a pull request: read the diff, run the tests, check the style and the design, "
        "and leave comments on each change before approving the merge"
    )
    texts = {"code_review": [long_text]} | {
        f"review_{thing}": [f"review a {thing} for q1", f"I need to review the {thing}"]
        for thing in ("quote", "claim", "lease")
    }
    index = WorkflowIndex()
    index.build(texts, {owner: terms(" ".join(t)) for owner, t in texts.items()})
    grams = index.query_grams("review PR 482")

    def plain(owner: str) -> float:
        weights = _weights_of(index, " ".join(texts[owner]))
        return sum(w * weights.get(g, 0.0) for g, w in grams.items()) / _norm(weights)

    plain_lead = plain("review_quote") / plain("code_review")
    long_score, terse_score = index.char_cosine(grams, ["code_review", "review_quote"])
    assert plain_lead > 2.5
    assert terse_score / long_score < 0.8 * plain_lead


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
                assert got[k].tolist() == [0.0] * 6
                continue
            sims = np.einsum(
                "ij,j->i", matcher.embedder.encode([d.text for d in docs]), query
            ).astype(np.float64)
            kinds = np.asarray([d.kind == "pattern" for d in docs])
            assert got[k, 0] == (sims[kinds].max() if kinds.any() else sims.max())
            assert got[k, 1] == (sims[~kinds].max() if (~kinds).any() else sims.max())
            assert got[k, 2] == np.sort(sims)[-2:].mean()
            vectors = matcher.embedder.encode([d.text for d in docs])
            assert np.isclose(got[k, 3], _unit(vectors.sum(axis=0)) @ query, atol=1e-6)
            mean = _catalog_mean(matcher.embedder, DOCUMENTS)
            centred = _unit(np.vstack([_unit(v - mean) for v in vectors]).sum(axis=0))
            assert np.isclose(got[k, 4], centred @ _unit(query - mean), atol=1e-6)
            # The stand-in model gives no token states: no coverage evidence.
            assert got[k, 5] == 0.0


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def _catalog_mean(embedder: HashingEmbedder, documents: Sequence[MatchDocument]) -> np.ndarray:
    """The mean of the workflows' centroids (each the unit sum of its texts' vectors)."""
    owners = sorted({d.owner for d in documents})
    centroids = [
        _unit(embedder.encode([d.text for d in documents if d.owner == owner]).sum(axis=0))
        for owner in owners
    ]
    mean: np.ndarray = np.mean(centroids, axis=0)
    return mean


def test_the_centred_cosine_is_not_crowded_out_by_look_alike_workflows() -> None:
    # Three hundred workflows worded alike ("urgent request help ...") share most of the
    # message's words; the one it asks for shares only "book a flight".
    crowd = [
        MatchDocument(f"crowd_{i}", f"urgent request help {thing}")
        for i, thing in enumerate(f"item{n}" for n in range(300))
    ]
    documents = [*crowd, MatchDocument("travel", "book a flight to the conference")]
    matcher = SemanticMatcher(HashingEmbedder(), documents)
    owners = ["travel", *(d.owner for d in crowd)]
    evidence = matcher.evidence("urgent request help: book a flight", owners)
    centroid, centred = evidence[:, 3], evidence[:, 4]
    assert centroid.argmax() != 0
    assert centred.argmax() == 0


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


def test_a_workflow_that_is_the_catalog_mean_has_no_centred_cosine() -> None:
    # One workflow (or two alike) is its catalog's mean: what is left after centring is
    # rounding error, which must not become a direction with a cosine of its own.
    for documents in (
        [MatchDocument("travel", "book a flight")],
        [MatchDocument("travel", "book a flight"), MatchDocument("trip", "book a flight")],
    ):
        matcher = SemanticMatcher(HashingEmbedder(), documents)
        owners = sorted({d.owner for d in documents})
        evidence = matcher.evidence("book a flight to Oslo", owners)
        assert evidence[:, 4].tolist() == [0.0] * len(owners)
        assert (evidence[:, 3] > 0.5).all()


@pytest.fixture(scope="module")
def onnx_embedder() -> OnnxEmbedder:
    return load_embedder()


def test_token_states_pool_to_the_sentence_vector(onnx_embedder: OnnxEmbedder) -> None:
    text = "Book a meeting room for Thursday's offsite"
    found = onnx_embedder.encode_tokens(text)
    assert np.array_equal(found.vector, onnx_embedder.encode([text])[0])
    assert found.pieces[:3] == ("book", "a", "meeting")
    assert found.tokens.shape == (len(found.pieces), found.vector.shape[0])
    assert np.allclose(np.linalg.norm(found.tokens, axis=1), 1.0, atol=1e-5)


IT_AND_GREETING = [
    MatchDocument("it_equipment", "order a new laptop for a starter"),
    MatchDocument("it_equipment", "request a replacement monitor"),
    MatchDocument("it_equipment", "IT equipment request", kind="title"),
    MatchDocument("greet_user", "say hello"),
    MatchDocument("greet_user", "greet me and tell me what you can do"),
    MatchDocument("greet_user", "Greeting", kind="title"),
]


def test_coverage_is_the_mean_closest_piece_of_each_content_word(
    onnx_embedder: OnnxEmbedder,
) -> None:
    matcher = SemanticMatcher(onnx_embedder, IT_AND_GREETING)
    message = "I need a new laptop, mine broke"
    owners = ["greet_user", "unknown", "it_equipment"]
    got = matcher.coverage(message, owners)
    query = onnx_embedder.encode_tokens(message)
    content = [i for i, p in enumerate(query.pieces) if p.isalpha() and p not in STOPWORDS]
    assert [query.pieces[i] for i in content] == ["new", "laptop", "mine", "broke"]
    for k, owner in enumerate(owners):
        rows = [
            (piece, state)
            for doc in IT_AND_GREETING
            if doc.owner == owner
            for piece, state in zip(*_pieces(onnx_embedder, doc.text), strict=True)
            if any(ch.isalnum() for ch in piece)
        ]
        if not rows:
            assert got[k] == 0.0
            continue
        # One row per distinct piece: the unit mean of its states.
        distinct = {piece: [] for piece, _ in rows}
        for piece, state in rows:
            distinct[piece].append(state)
        pieces = np.vstack([_unit(np.mean(v, axis=0)) for v in distinct.values()])
        pieces = pieces.astype(np.float16).astype(np.float32)
        expected = (query.tokens[content] @ pieces.T).max(axis=1).mean()
        assert np.isclose(got[k], expected, atol=1e-5)
    # "a new laptop" has a counterpart in the IT workflow and none in the greeting.
    assert got[2] > got[0] + 0.15
    assert matcher.evidence(message, owners)[:, 5].tolist() == got.tolist()


def test_a_message_of_stop_words_alone_has_no_coverage(onnx_embedder: OnnxEmbedder) -> None:
    matcher = SemanticMatcher(onnx_embedder, IT_AND_GREETING)
    assert matcher.coverage("could you do it for me?", ["it_equipment"]).tolist() == [0.0]
    assert matcher.coverage("🙂🙂", ["it_equipment"]).tolist() == [0.0]


def _pieces(embedder: OnnxEmbedder, text: str) -> tuple[tuple[str, ...], np.ndarray]:
    found = embedder.encode_tokens(text)
    return found.pieces, found.tokens


def test_a_rebuild_reads_only_changed_workflows_through_the_model_again(
    onnx_embedder: OnnxEmbedder,
) -> None:
    matcher = SemanticMatcher(onnx_embedder, IT_AND_GREETING)
    before = matcher.encoded_texts
    message = "I need a new laptop, mine broke"
    it_coverage = matcher.coverage(message, ["it_equipment"])
    changed = [*IT_AND_GREETING, MatchDocument("greet_user", "introduce yourself")]
    matcher.build(changed)
    # The new text, then the greeting's three others for their token states; IT kept.
    assert matcher.encoded_texts - before == 4
    assert matcher.coverage(message, ["it_equipment"]).tolist() == it_coverage.tolist()
    fresh = SemanticMatcher(onnx_embedder, changed)
    owners = ["greet_user", "it_equipment"]
    assert np.allclose(matcher.coverage(message, owners), fresh.coverage(message, owners))


class _Recording:
    """A token embedder that records how many texts each call of the model is handed."""

    def __init__(self, inner: OnnxEmbedder, batches: bool) -> None:
        self.inner = inner
        self.calls: list[int] = []
        if batches:
            self.encode_tokens_many = self._many

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.encode(texts)

    def encode_tokens(self, text: str) -> Encoded:
        self.calls.append(1)
        return self.inner.encode_tokens(text)

    def _many(self, texts: Sequence[str]) -> list[Encoded]:
        self.calls.append(len(texts))
        return self.inner.encode_tokens_many(texts)


def test_an_index_build_hands_the_model_a_chunk_at_a_time(onnx_embedder: OnnxEmbedder) -> None:
    docs = [
        MatchDocument(f"flow_{i // 3:03d}", f"{verb} the {noun} number {i}")
        for i, (verb, noun) in enumerate(
            (v, n)
            for v in ("order", "cancel", "renew", "audit", "ship")
            for n in ("laptop", "licence", "badge", "desk", "phone", "invoice", "parcel")
            for _ in range(5)
        )
    ]
    batched = _Recording(onnx_embedder, batches=True)
    matcher = SemanticMatcher(batched, docs)
    assert isinstance(batched, BatchTokenEmbedder)
    assert sum(batched.calls) == matcher.encoded_texts == len(docs)
    # Whole workflows (three texts each) go to a call until it holds BUILD_CHUNK texts.
    assert all(BUILD_CHUNK <= n < BUILD_CHUNK + 3 for n in batched.calls[:-1])
    assert 0 < batched.calls[-1] < BUILD_CHUNK + 3
    alone = _Recording(onnx_embedder, batches=False)
    reference = SemanticMatcher(alone, docs)
    assert set(alone.calls) == {1}
    message = "please renew my phone licence"
    owners = ["flow_001", "flow_040", "flow_099"]
    assert np.allclose(matcher.evidence(message, owners), reference.evidence(message, owners))
    assert np.allclose(matcher.coverage(message, owners), reference.coverage(message, owners))
