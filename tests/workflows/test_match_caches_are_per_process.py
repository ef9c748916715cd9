"""Matching's caches of messages are one per process, bounded by bytes, whatever the orgs.

Each served set of workflows (the deployment-wide one and each authoring org's) kept its own
cache of 512 encoded messages, each holding the message's full token states (190 KB with
MiniLM, 380 KB with the cascade's encoder): about 105 MB more per org, 6 to 18 GB with 60
orgs (review r6 F1). The typo lookups (65,536 per index, of terms of any length) and word
associations (4,096 terms per index) had the same shape.
"""

from __future__ import annotations

import gc
import hashlib
import tracemalloc
from collections.abc import Sequence

import numpy as np
import pytest

from aptix.workflows.matching import evidence, lexical, queries
from aptix.workflows.matching.lexical import LexicalMatcher, MatchDocument
from aptix.workflows.matching.semantic import Encoded, SemanticMatcher

#: MiniLM's width and its longest message's word pieces (128 less [CLS] and [SEP]).
WIDTH, PIECES = 384, 126
ORGS = 12


class StatesEmbedder:
    """Full token states for every message, each piece a content word (the worst case)."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.vstack([self.encode_tokens(text).vector[None, :] for text in texts])

    def encode_tokens(self, text: str) -> Encoded:
        self.encoded.append(text)
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
        states = np.random.default_rng(seed).standard_normal((PIECES, WIDTH), dtype=np.float32)
        states /= np.linalg.norm(states, axis=1, keepdims=True)
        vector = states.mean(axis=0)
        words = tuple(f"word{chr(97 + k % 26)}{chr(97 + k // 26)}" for k in range(PIECES))
        return Encoded(vector / np.linalg.norm(vector), states, words)


def _orgs(embedder: StatesEmbedder) -> list[SemanticMatcher]:
    shared = [MatchDocument("shared_flow", "plan the team offsite")]
    root = SemanticMatcher(embedder, shared)
    orgs = [root]
    for org in range(ORGS):
        own = root.sibling()
        own.build([*shared, MatchDocument(f"own_{org}", f"run audit number {org}")], root)
        orgs.append(own)
    return orgs


def test_every_orgs_matcher_reads_one_cache_that_stays_within_its_bytes() -> None:
    embedder = StatesEmbedder()
    orgs = _orgs(embedder)
    cache = queries.remembered()
    messages = [f"message {i} about the offsite" for i in range(300)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, message in enumerate(messages):
            orgs[i % len(orgs)].coverage(message, ["shared_flow"])
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 300 messages' full states are 58 MB; kept per org they would all still be held.
    assert PIECES * WIDTH * 4 * len(messages) > 1.5 * cache.limit
    assert cache.nbytes <= cache.limit
    assert held < 1.1 * cache.limit
    # An org reads what another org's matcher encoded: the encoding is the encoder's alone.
    recent = messages[-1]
    count = len(embedder.encoded)
    for org in orgs:
        assert np.array_equal(org.embed_query(recent), orgs[0].embed_query(recent))
    assert len(embedder.encoded) == count


def test_a_message_is_remembered_by_what_matching_reads_of_it() -> None:
    embedder = StatesEmbedder()
    matcher = SemanticMatcher(embedder, [MatchDocument("flow", "plan the team offsite")])
    message = "a message of its own for the sizes"
    matcher.coverage(message, ["flow"])
    full = embedder.encode_tokens(message)
    kept = queries.remembered().get((queries.number_of(embedder), message))
    assert kept is not None
    # The content words' states and the vector: here every piece is a content word.
    assert np.array_equal(kept.content, full.tokens)  # type: ignore[attr-defined]
    assert np.array_equal(kept.vector, full.vector)  # type: ignore[attr-defined]


def test_typo_lookups_of_every_index_share_one_bounded_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lexical._KNOWN, "limit", 200_000)
    indexes = [
        LexicalMatcher([MatchDocument(f"flow_{i}", f"reconcile the quarterly ledger {i}")])
        for i in range(ORGS)
    ]
    for n in range(3_000):
        # Each a near miss of "reconcile", so looked up as a typo, and each new.
        indexes[n % ORGS].known_share(f"reconcil{n:05d}")
    assert 0 < lexical._KNOWN.nbytes <= 200_000
    entries = len(lexical._KNOWN)
    long_word = "r" + "e" * 1_999
    for index in indexes:
        index.known_share(long_word)
    # A term longer than a cached word is looked up each time, never kept.
    assert len(lexical._KNOWN) == entries


def test_word_associations_of_every_index_share_one_bounded_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aptix.workflows.matching.associations import Associations

    monkeypatch.setattr(evidence._TERMS, "limit", 100_000)
    model = Associations({f"term{n}": {"ledger": 0.5} for n in range(2_000)})
    indexes = []
    for i in range(ORGS):
        index = evidence.WorkflowIndex()
        index.build({f"flow_{i}": ["reconcile the ledger"]}, {f"flow_{i}": ["ledger"]})
        indexes.append(index)
    for n in range(2_000):
        found = indexes[n % ORGS].associations(model, [f"term{n}"], [f"flow_{n % ORGS}"])
        assert found.tolist() == [0.5]
    assert 0 < evidence._TERMS.nbytes <= 100_000


def test_query_terms_of_every_index_share_one_bounded_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lexical._QUERIES, "limit", 100_000)
    indexes = [
        LexicalMatcher([MatchDocument(f"flow_{i}", f"reconcile the quarterly ledger {i}")])
        for i in range(ORGS)
    ]
    for n in range(2_000):
        message = f"reconcile the ledger for customer {n}"
        assert indexes[n % ORGS].query_terms(message) == indexes[n % ORGS].query_terms(message)
    assert 0 < lexical._QUERIES.nbytes <= 100_000
