"""The cascade in the product: a larger encoder's ranker re-orders unsure accepted decisions."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from aptix.workflows.matching.cascade import Cascade, CascadeModel, margin, reorder
from aptix.workflows.matching.combined import WorkflowMatcher, documents_for
from aptix.workflows.matching.fusion import FusionModel
from aptix.workflows.matching.lexical import MatchDocument
from aptix.workflows.matching.routing import (
    GATE_THRESHOLD,
    SEMANTIC_RANK,
    Decision,
)
from aptix.workflows.matching.semantic import (
    DEFAULT_MODEL,
    MODELS,
    VOCABULARY,
    Encoded,
    OnnxEmbedder,
    SemanticMatcher,
    Vectors,
    model_file,
)
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.matchset import catalog

ACCEPT, REJECT = GATE_THRESHOLD + 0.3, GATE_THRESHOLD - 0.3
DOCS = [
    MatchDocument("leave", "Request Annual Leave"),
    MatchDocument("leave", "book days off", kind="title"),
    MatchDocument("laptop", "Order A New Laptop"),
    MatchDocument("expense", "File An Expense Claim"),
]


@pytest.fixture(scope="module")
def encoders(tmp_path_factory: pytest.TempPathFactory) -> tuple[OnnxEmbedder, OnnxEmbedder]:
    """The shipped encoder, and as the "larger" one the same weights reading cased pieces."""
    from tokenizers import BertWordPieceTokenizer

    spec = tmp_path_factory.mktemp("cased") / "tokenizer.json"
    BertWordPieceTokenizer(str(VOCABULARY), lowercase=False, strip_accents=True).save(str(spec))
    onnx = model_file(MODELS[DEFAULT_MODEL])
    return OnnxEmbedder(onnx), OnnxEmbedder(onnx, tokenizer=spec)


def _ranker(column: str, weight: float) -> FusionModel:
    """A ranker that reads one column of the semantic evidence."""
    n = len(SEMANTIC_RANK)
    weights = tuple(weight if name == column else 0.0 for name in SEMANTIC_RANK)
    return FusionModel(SEMANTIC_RANK, weights, 0.0, (0.0,) * n, (1.0,) * n)


def test_margin_is_first_less_second_and_one_for_a_lone_candidate() -> None:
    assert margin(Decision((("a", 0.7), ("b", 0.2)), ACCEPT)) == pytest.approx(0.5)
    assert margin(Decision((("a", 0.4),), ACCEPT)) == 1.0


def test_reorder_takes_only_the_order_and_keeps_what_the_first_decision_dropped() -> None:
    first = Decision((("a", 0.50), ("b", 0.45), ("c", 0.05)), ACCEPT, weak=True)
    # "greet" was dropped by the first decision (a built-in the message does not ask for).
    p = {"a": 0.1, "b": 0.3, "c": 0.6, "greet": 0.9}
    moved = reorder(first, p, stated=None)
    assert moved == Decision((("c", 0.6), ("b", 0.3), ("a", 0.1)), ACCEPT, weak=True)
    # A stated pattern's workflow stays first whatever the second ranker says.
    assert [w for w, _ in reorder(first, p, stated="a").ranked] == ["a", "c", "b"]


def test_reorder_adds_the_larger_encoders_candidates_but_not_a_dropped_built_in() -> None:
    first = Decision((("a", 0.5), ("b", 0.45)), ACCEPT)
    p = {"a": 0.2, "b": 0.3, "greet": 0.1, "c": 0.9, "help": 0.8}
    # "greet" was a candidate of the first side and dropped: built-ins stay out, the added
    # built-in "help" included; the added "c" goes first.
    moved = reorder(first, p, None, added={"c", "help"}, builtin={"greet", "help"})
    assert moved == Decision((("c", 0.9), ("b", 0.3), ("a", 0.2)), ACCEPT)
    # No built-in was dropped: an added one may join.
    p.pop("greet")
    kept = reorder(first, p, "a", added={"c", "help"}, builtin={"greet", "help"})
    assert [w for w, _ in kept.ranked] == ["a", "c", "help", "b"]


def test_the_model_round_trips_through_json() -> None:
    model = CascadeModel("mpnet", _ranker("pattern", 2.5), 0.61)
    assert CascadeModel.from_json(json.loads(json.dumps(model.to_json()))) == model


def test_the_index_is_built_behind_the_catalog_and_scores_with_the_larger_encoder(
    encoders: tuple[OnnxEmbedder, OnnxEmbedder],
) -> None:
    small, large = encoders
    cascade = Cascade(large, CascadeModel("cased", _ranker("pattern", 1.0), 1.1))
    assert cascade.index is None  # nothing built yet
    cascade.build(DOCS)
    assert cascade.wait(30)
    owners = ["leave", "laptop", "expense"]
    message = "I NEED TIME OFF next week"
    expected = SemanticMatcher(large, DOCS).evidence(message, owners)
    assert cascade.index is not None
    found = cascade.index.evidence(message, owners)
    assert np.allclose(found, expected)
    assert not np.allclose(found, SemanticMatcher(small, DOCS).evidence(message, owners))


class _Gated:
    """The larger encoder, held at a gate: the worker's build waits until it opens."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner = inner
        self.open = threading.Event()

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.open.wait(30)
        return self.inner.encode(texts)

    def encode_tokens(self, text: str) -> Encoded:
        self.open.wait(30)
        return self.inner.encode_tokens(text)


def test_a_changed_catalog_stops_the_old_index_serving_until_the_new_one_is_built(
    encoders: tuple[OnnxEmbedder, OnnxEmbedder],
) -> None:
    _, large = encoders
    gated = _Gated(large)
    cascade = Cascade(gated, CascadeModel("cased", _ranker("pattern", 1.0), 1.1))
    gated.open.set()
    cascade.build(DOCS)
    assert cascade.wait(30)
    accepted = Decision((("leave", 0.5), ("laptop", 0.45)), ACCEPT)
    assert cascade.wants(accepted)
    gated.open.clear()
    cascade.build([*DOCS, MatchDocument("travel", "book a business trip")])
    # The worker is held: the stale index (no "travel") serves no one meanwhile.
    assert not cascade.wants(accepted)
    assert cascade.index is None
    assert not cascade.wait(0.2)
    gated.open.set()
    assert cascade.wait(30)
    assert cascade.index is not None
    assert cascade.index.evidence("book a business trip", ["travel"])[0, 0] > 0.99


def test_only_accepted_decisions_below_the_margin_are_wanted(
    encoders: tuple[OnnxEmbedder, OnnxEmbedder],
) -> None:
    _, large = encoders
    cascade = Cascade(large, CascadeModel("cased", _ranker("pattern", 1.0), 0.2))
    cascade.build(DOCS)
    assert cascade.wait(30)
    assert cascade.wants(Decision((("a", 0.5), ("b", 0.45)), ACCEPT))
    assert not cascade.wants(Decision((("a", 0.9), ("b", 0.05)), ACCEPT))  # sure
    assert not cascade.wants(Decision((("a", 0.5), ("b", 0.45)), REJECT))  # rejected
    assert not cascade.wants(Decision((), ACCEPT))  # nothing to order


class _Broken:
    """An encoder that fails, as a corrupt or missing model would at run time."""

    def encode(self, texts: Sequence[str]) -> Vectors:
        raise RuntimeError("\x1b[2J the model file vanished")


def test_a_failing_encoder_leaves_the_first_order_and_logs_once_without_the_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cascade = Cascade(_Broken(), CascadeModel("broken", _ranker("pattern", 1.0), 1.1))
    with caplog.at_level(logging.WARNING, logger="aptix.workflows"):
        cascade.build(DOCS)
        assert not cascade.wait(30)
    assert not cascade.wants(Decision((("a", 0.5), ("b", 0.45)), ACCEPT))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "MiniLM's order stands" in warnings[0]
    assert "\x1b" not in warnings[0]


def _registry(matcher: WorkflowMatcher) -> WorkflowRegistry:
    registry = WorkflowRegistry(list(catalog()), matcher=matcher)
    registry.match("build the index")
    return registry


def test_the_matcher_takes_the_larger_rankers_order_and_never_its_verdict(
    encoders: tuple[OnnxEmbedder, OnnxEmbedder],
) -> None:
    small, large = encoders
    plain = _registry(WorkflowMatcher(SemanticMatcher(small)))
    # A ranker that prefers the candidate *least* like the message: every re-ordered
    # decision then visibly differs from MiniLM's, and only in its order.
    contrary = CascadeModel("cased", _ranker("pattern", -8.0), 1.1)
    cascade = Cascade(large, contrary)
    matcher = WorkflowMatcher(SemanticMatcher(small), cascade=cascade)
    registry = _registry(matcher)
    assert cascade.wait(60)
    messages = [
        "I'd like to book some annual leave in March",
        "my laptop screen is broken, can I get a new one",
        "tell me a story about a dragon",
        "what's the weather like",
    ]
    moved = 0
    for message in messages:
        first, second = plain.matcher.decide(message), matcher.decide(message)
        assert second.gate == first.gate
        assert second.accepted == first.accepted
        kept, now = {w for w, _ in first.ranked}, {w for w, _ in second.ranked}
        # Only the larger encoder's own best may join MiniLM's kept candidates.
        assert kept <= now
        assert cascade.index is not None
        assert now - kept <= set(cascade.index.rank(message, 10))
        if first.accepted:
            assert second.ranked[0][0] != first.ranked[0][0] or len(first.ranked) == 1
            moved += 1
        else:
            assert second == first
            assert registry.match(message) == []
    assert moved >= 1
    # With a margin nothing falls below, the cascade changes nothing.
    never = WorkflowMatcher(SemanticMatcher(small), cascade=Cascade(large, contrary_with(0.0)))
    _registry(never)
    assert never.cascade is not None
    assert never.cascade.wait(60)
    for message in messages:
        assert never.decide(message) == plain.matcher.decide(message)


class _Rewriting:
    """The larger encoder reading one phrase as another: it alone sees a new candidate."""

    def __init__(self, inner: OnnxEmbedder, phrase: str, meaning: str) -> None:
        self.inner, self.phrase, self.meaning = inner, phrase, meaning

    def _read(self, text: str) -> str:
        return self.meaning if self.phrase in text else text

    def encode(self, texts: Sequence[str]) -> Vectors:
        return self.inner.encode([self._read(t) for t in texts])

    def encode_tokens(self, text: str) -> Encoded:
        return self.inner.encode_tokens(self._read(text))


def test_the_larger_encoders_own_best_joins_the_candidates_and_may_come_first(
    encoders: tuple[OnnxEmbedder, OnnxEmbedder],
) -> None:
    small, large = encoders
    plain = _registry(WorkflowMatcher(SemanticMatcher(small)))
    larger = _Rewriting(large, "payments service", "onboard a new employee starting monday")
    cascade = Cascade(larger, CascadeModel("rewriting", _ranker("pattern", 8.0), 1.1))
    matcher = WorkflowMatcher(SemanticMatcher(small), cascade=cascade)
    _registry(matcher)
    assert cascade.wait(60)
    message = "please review the DDR for the payments service"
    first = plain.matcher.decide(message)
    assert first.accepted
    assert first.ranked[0][0] == "review_ddr"
    assert "onboard_employee" not in plain.matcher.candidates(message).ids
    second = matcher.decide(message)
    assert second.ranked[0][0] == "onboard_employee"
    assert (second.gate, second.weak) == (first.gate, first.weak)
    assert {w for w, _ in first.ranked} < {w for w, _ in second.ranked}


def contrary_with(margin_: float) -> CascadeModel:
    """The contrary ranker with another margin."""
    return CascadeModel("cased", _ranker("pattern", -8.0), margin_)


def test_each_org_gets_its_own_index_from_the_sibling(
    encoders: tuple[OnnxEmbedder, OnnxEmbedder],
) -> None:
    small, large = encoders
    matcher = WorkflowMatcher(SemanticMatcher(small), cascade=Cascade(large, contrary_with(1.1)))
    other = matcher.sibling()
    assert other.cascade is not None
    assert other.cascade is not matcher.cascade
    other.rebuild([])
    matcher.rebuild([])
    assert other.cascade.wait(30)
    assert matcher.cascade is not None
    assert matcher.cascade.wait(30)


def test_an_org_cascade_borrows_the_deployment_wide_rows(
    encoders: tuple[OnnxEmbedder, OnnxEmbedder],
) -> None:
    small, large = encoders
    matcher = WorkflowMatcher(SemanticMatcher(small), cascade=Cascade(large, contrary_with(1.1)))
    shared = list(catalog())
    registry = WorkflowRegistry(shared, matcher=matcher, matcher_factory=matcher.sibling)
    own = shared[0].model_copy(update={"workflow_id": "acme_own", "title": "Close The Books"})
    registry.publish(own, org="acme")
    # The org's build waits for the deployment-wide one, then borrows its rows.
    assert registry.settle("acme", timeout=120)
    assert registry.settle(None, timeout=120)
    with registry._indexed("acme") as org_matcher:
        assert org_matcher.cascade is not None
        index = org_matcher.cascade.index
    assert index is not None
    assert index._vectors.lends
    assert len(index._vectors.own) == len(documents_for(own))
    fresh = SemanticMatcher(large, [d for m in [*shared, own] for d in documents_for(m)])
    owners = sorted({m.workflow_id for m in [*shared, own]})
    for message in ("close the books", "I need a new laptop", "book days off"):
        assert np.array_equal(index.evidence(message, owners), fresh.evidence(message, owners))


def test_the_lexical_configuration_takes_no_cascade(
    encoders: tuple[OnnxEmbedder, OnnxEmbedder],
) -> None:
    _, large = encoders
    assert WorkflowMatcher(cascade=Cascade(large, contrary_with(1.1))).cascade is None


def test_a_model_with_its_own_tokenizer_json_loads_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from tokenizers import BertWordPieceTokenizer

    import aptix.workflows.matching.semantic as semantic_module
    from aptix.errors import ConfigurationError

    shipped = MODELS[DEFAULT_MODEL]
    shutil.copy(model_file(shipped), tmp_path / "model.onnx")
    BertWordPieceTokenizer(str(VOCABULARY), lowercase=False, strip_accents=True).save(
        str(tmp_path / "cased.json")
    )
    text = ["ORDER A NEW LAPTOP"]
    default = semantic_module.load_embedder().encode(text)
    monkeypatch.setattr(semantic_module, "DATA", tmp_path)
    spec = semantic_module.ModelSpec(
        "cased-test", "aptix", "cased", shipped.sha256, file="model.onnx", tokenizer="cased.json"
    )
    monkeypatch.setitem(MODELS, spec.name, spec)
    loaded = semantic_module.load_embedder(spec.name).encode(text)
    cased = OnnxEmbedder(tmp_path / "model.onnx", tokenizer=tmp_path / "cased.json").encode(text)
    assert np.allclose(loaded, cased)
    assert float(loaded[0] @ default[0]) < 0.99
    missing = semantic_module.ModelSpec(
        "no-tokenizer", "aptix", "x", shipped.sha256, file="model.onnx", tokenizer="gone.json"
    )
    monkeypatch.setitem(MODELS, missing.name, missing)
    with pytest.raises(ConfigurationError, match=r"gone\.json is missing"):
        semantic_module.load_embedder(missing.name)
    # A pinned tokenizer is verified as the weights are.
    pinned = hashlib.sha256((tmp_path / "cased.json").read_bytes()).hexdigest()
    for digest, loads in ((pinned, True), ("0" * 64, False)):
        spec = dataclasses.replace(spec, name=f"pinned-{loads}", tokenizer_sha256=digest)
        monkeypatch.setitem(MODELS, spec.name, spec)
        if loads:
            assert np.allclose(semantic_module.load_embedder(spec.name).encode(text), cased)
        else:
            with pytest.raises(ConfigurationError, match="refusing to load"):
                semantic_module.load_embedder(spec.name)


def test_a_process_exiting_mid_build_ends_with_its_own_exit_code(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    # The first match starts the larger index's build and the process ends at once; without
    # the stop at exit, onnxruntime aborts the interpreter's finalisation (SIGABRT, 134).
    script = (
        "import asyncio, sys\n"
        "from aptix.runtime import open_runtime\n"
        "async def main():\n"
        "    async with open_runtime() as runtime:\n"
        "        runtime.workflows.registry.match('we need a design decision record')\n"
        "        assert runtime.workflows.registry.matcher.cascade is not None\n"
        "asyncio.run(main())\n"
        "sys.exit(7)\n"
    )
    env = {**os.environ, "APTIX_MATCH_CASCADE": "true", "APTIX_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 7, done.stderr
    assert "terminate called" not in done.stderr
