"""The cascade as it ships: the larger encoder's weights package, its hash and the runtime.

These tests need ``weights/aptix-routing-mpnet`` installed (``scripts/check`` installs it);
without it they fail rather than skip.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.workflows.matching.cascade import default_cascade, margin
from aptix.workflows.matching.semantic import MODELS, load_embedder, model_file, tokenizer_file
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.services import build_matcher
from tests.workflows.matchset import catalog, labelled

LARGER = "mpnet-routing-int4"
#: How many of the development set's requests are matched through the runtime.
REQUESTS = 60


def test_the_shipped_cascade_names_the_larger_encoder_and_its_weights_verify() -> None:
    model = default_cascade()
    assert model is not None
    assert model.encoder == LARGER
    assert 0.0 < model.margin < 1.0
    spec = MODELS[LARGER]
    path = model_file(spec)  # ConfigurationError (a failure) when the package is missing
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256
    tokenizer = tokenizer_file(spec, path)
    assert tokenizer is not None
    assert tokenizer.parent == path.parent
    vectors = load_embedder(LARGER).encode(["book two days off in March", "order a new laptop"])
    assert vectors.shape == (2, 768)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert float(vectors[0] @ vectors[1]) < 0.8


def test_the_installed_weights_serve_the_cascade_when_asked_for() -> None:
    matcher = build_matcher(True, True)
    assert matcher.cascade is not None
    assert matcher.cascade.model == default_cascade()


@contextlib.asynccontextmanager
async def _development_catalog(tmp_path: Path) -> AsyncIterator[WorkflowRegistry]:
    """A runtime serving the development catalog, its larger index built (the default)."""
    # On by default where the weights are installed (the fiftieth round's rules R2 and R3).
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False)
    async with open_runtime(settings) as runtime:
        registry = runtime.workflows.registry
        registry.reset(list(catalog()))
        assert registry.settle(None, 120) is True
        yield registry


async def test_the_runtime_re_orders_unsure_matches_with_the_larger_encoder(
    tmp_path: Path,
) -> None:
    async with _development_catalog(tmp_path) as registry:
        matcher = registry.matcher
        cascade = matcher.cascade
        assert cascade is not None
        consulted = 0
        requests = [row.message for row in labelled() if row.expected is not None]
        for message in requests[:REQUESTS]:
            first = matcher.decision(matcher.candidates(message))
            final = matcher.decide(message)
            assert (final.gate, final.weak) == (first.gate, first.weak)
            if cascade.wants(first):
                consulted += 1
                assert margin(first) < cascade.model.margin
                assert {w for w, _ in first.ranked} <= {w for w, _ in final.ranked}
            else:
                assert final == first
        assert consulted >= 1


async def test_the_runtime_leaves_the_cascade_off_when_told_to(tmp_path: Path) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, match_cascade=False)
    async with open_runtime(settings) as runtime:
        assert runtime.workflows.registry.matcher.cascade is None


def test_the_larger_encoder_reads_each_text_of_a_batch_as_it_reads_it_alone() -> None:
    embedder = load_embedder(LARGER)
    assert embedder.batch > 1
    # int8 activations are quantised per tensor: MiniLM must encode one text at a time.
    assert load_embedder().batch == 1
    texts = [
        "ddr",
        "start a new design decision record for the caching layer",
        "🙂🙂",
        "bad \ud800 surrogate",
        "approve " * 400,  # truncated to the model's 128 tokens
        "¿puedo pedir un portátil nuevo?",
        *(m.message for m in labelled()[:40]),
    ]
    together = embedder.encode_tokens_many(texts)
    for text, found in zip(texts, together, strict=True):
        alone = embedder.encode_tokens(text)
        assert found.pieces == alone.pieces
        assert float(found.vector @ alone.vector) > 0.9999
        assert np.allclose(found.tokens, alone.tokens, atol=2e-3)


async def test_bad_input_gets_an_empty_match_or_a_list_with_the_cascade_serving(
    tmp_path: Path,
) -> None:
    async with _development_catalog(tmp_path) as registry:
        for message in (
            "",
            "   \n\t",
            "approve the ddr " * 7_000,  # ~100 kB
            "🙂🚀🔥" * 40,
            "?!.,;:" * 30,
            "оформить отпуск на две недели",
            "bad \ud800 surrogate ddr",
            "\x1b[2J\x1b]0;title\x07 start a new ddr",
        ):
            found = registry.match(message)
            assert isinstance(found, list)
            assert all(0.0 <= m.match_score <= 1.0 for m in found)
