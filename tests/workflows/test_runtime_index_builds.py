"""The index builds of the runtimes one process opens: a closed one's stop, a later one reuses.

Each runtime the test suite opened started the cascade's larger encoder on the built-in
catalog behind it, and closing the runtime left that build running: the threads of closed
runtimes piled up and shared the cores with the tests (five left by five runtimes).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.workflows.matching.cascade import Cascade, CascadeModel
from aptix.workflows.matching.exiting import Closing, Stopped, until_exit
from aptix.workflows.matching.lexical import MatchDocument
from aptix.workflows.matching.semantic import (
    Encoded,
    SemanticMatcher,
    forget_built,
    load_embedder,
)
from aptix.workflows.matching.stored import StoredEncodings
from tests.logs import records_of
from tests.workflows.test_cascade_matching import _ranker
from tests.workflows.test_stored_encodings import settled_encodings

WIDTH = 8
DOCS = [MatchDocument(f"flow_{i:03d}", f"handle request number {i}") for i in range(100)]


class _Runs:
    """A token embedder that counts the texts of each model run; it can hold or close one."""

    batch = 4

    def __init__(self, closing: Closing | None = None, runs: int = 0) -> None:
        self.runs: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self._closing, self._close_after = closing, runs

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.vstack([found.vector[None, :] for found in self.encode_tokens_many(texts)])

    def encode_tokens(self, text: str) -> Encoded:
        return self.encode_tokens_many([text])[0]

    def encode_tokens_many(self, texts: Sequence[str]) -> list[Encoded]:
        self.entered.set()
        self.gate.wait(30)
        self.runs.append(len(texts))
        if self._closing is not None and len(self.runs) == self._close_after:
            self._closing.set()
        return [_encoded(text) for text in texts]


def _encoded(text: str) -> Encoded:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
    states = np.random.default_rng(seed).standard_normal((3, WIDTH)).astype(np.float32)
    states /= np.linalg.norm(states, axis=1, keepdims=True)
    vector = states.mean(axis=0)
    return Encoded(vector / np.linalg.norm(vector), states, ("alpha", "beta", "gamma"))


def _store(folder: Path) -> StoredEncodings:
    return StoredEncodings(folder, "runs", "0" * 64)


@pytest.fixture(autouse=True)
def _nothing_built() -> Iterator[None]:
    forget_built()
    yield
    forget_built()


def test_closing_a_cascade_stops_its_build_within_one_model_run() -> None:
    embedder = _Runs()
    embedder.gate.clear()
    cascade = Cascade(embedder, CascadeModel("runs", _ranker("pattern", 1.0), 1.1))
    cascade.build(DOCS)
    assert embedder.entered.wait(10)
    cascade.close()
    embedder.gate.set()
    assert cascade.wait(10) is False  # the worker ended, with no index
    assert embedder.runs == [4]  # the run under way, and none after it
    assert cascade.closed
    # A sibling shares the runtime that closed: it starts no build either.
    sibling = cascade.sibling()
    assert sibling.closed
    sibling.build(DOCS)
    assert sibling.wait(10) is False
    assert embedder.runs == [4]


def test_a_build_stopped_half_way_spares_the_next_what_it_encoded(tmp_path: Path) -> None:
    closed = Closing()
    # 100 texts, a run of 4 at a time: the runtime closes as the eighteenth run ends.
    embedder = _Runs(closed, runs=18)
    with pytest.raises(Stopped):
        SemanticMatcher(until_exit(embedder, closed), DOCS, _store(tmp_path / "first"))
    assert embedder.runs == [4] * 18
    again = SemanticMatcher(until_exit(embedder), DOCS, _store(tmp_path / "second"))
    assert again.encoded_texts == len(DOCS) - 72
    fresh = SemanticMatcher(_Runs(), DOCS)
    message = "handle request number 7"
    assert again.match(message) == fresh.match(message)
    # What was taken from the first build is written with the rest.
    assert _store(tmp_path / "second").path.is_file()
    assert SemanticMatcher(_Runs(), DOCS, _store(tmp_path / "second")).encoded_texts == 0


def test_an_index_without_a_store_neither_reads_nor_leaves_encodings(tmp_path: Path) -> None:
    embedder = _Runs()
    SemanticMatcher(embedder, DOCS)  # an org's own, or a test's: not the process's catalog
    stored = SemanticMatcher(embedder, DOCS, _store(tmp_path))
    assert stored.encoded_texts == len(DOCS)
    assert SemanticMatcher(embedder, DOCS).encoded_texts == len(DOCS)


async def test_a_closed_runtime_stops_its_builds_and_the_next_runtime_encodes_nothing(
    tmp_path: Path,
) -> None:
    decisions = []
    for name in ("first", "second"):
        settings = AptixSettings(data_dir=tmp_path / name, load_plugins=False)
        async with open_runtime(settings) as runtime:
            encoded = settled_encodings(runtime)
            registry = runtime.workflows.registry
            decisions.append(registry.match("I want to write a new workflow for invoices"))
        assert registry.matcher.cascade is not None
        assert registry.matcher.cascade.closed
        if name == "first":
            assert min(encoded) > 0
        else:
            # The same catalog and models in the same process: the first runtime's work.
            assert encoded == (0, 0)
        # Each data dir gets its encodings for the restart that reads them.
        files = sorted(p.name.split("-")[0] for p in (tmp_path / name / "index").glob("*.npz"))
        assert files == ["minilm", "mpnet"]
    assert decisions[0] == decisions[1]


class _Session:
    """An onnxruntime session that says when a run has begun, and how each one ended."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.began = threading.Event()
        self.ended: list[str] = []

    def run(self, outputs: Any, feeds: Any, options: Any = None) -> Any:
        self.began.set()
        try:
            found = self._inner.run(outputs, feeds, options)
        except Exception as exc:
            self.ended.append(str(exc))
            raise
        self.ended.append("done")
        return found


def test_closing_ends_the_model_run_under_way(monkeypatch: pytest.MonkeyPatch) -> None:
    model = load_embedder("mpnet-routing-int4")
    session = _Session(model._session)
    monkeypatch.setattr(model, "_session", session)
    closing = Closing()
    texts = [
        f"order laptop number {i} for the new starter in the finance team" * 4 for i in range(32)
    ]
    stopped: list[BaseException] = []

    def build() -> None:
        try:
            until_exit(model, closing).encode_tokens_many(texts)  # type: ignore[attr-defined]
        except BaseException as exc:
            stopped.append(exc)

    worker = threading.Thread(target=build)
    worker.start()
    assert session.began.wait(60)
    closing.set()
    worker.join(60)
    assert not worker.is_alive()
    assert [type(exc) for exc in stopped] == [Stopped]
    # The run was ended by onnxruntime, not let finish: nothing of it is kept.
    assert len(session.ended) == 1
    assert "terminate" in session.ended[0]
    # The shared model still runs for everyone else.
    assert until_exit(model).encode_tokens_many(texts[:1])[0].vector.shape == (768,)


def test_a_cascade_whose_file_is_of_another_width_builds_anew_and_rewrites_it(
    tmp_path: Path,
) -> None:
    SemanticMatcher(_Runs(), DOCS, _store(tmp_path))
    with np.load(_store(tmp_path).path) as data:
        arrays = dict(data)
    # Another encoder's file under this one's name: twice the width, the arrays agreeing.
    wider = {**arrays, "vectors": np.hstack([arrays["vectors"]] * 2) / np.sqrt(2)}
    wider["pieces"] = (np.hstack([arrays["pieces"]] * 2) / np.sqrt(2)).astype(np.float16)
    np.savez(_store(tmp_path).path, **wider)
    forget_built()  # a restart
    embedder = _Runs()
    cascade = Cascade(
        embedder, CascadeModel("runs", _ranker("pattern", 1.0), 1.1), _store(tmp_path)
    )
    with records_of("aptix.workflows", logging.WARNING) as logged:
        cascade.build(DOCS)
        assert cascade.wait(30) is True
    assert [r.getMessage() for r in logged] == [
        f"Ignoring the stored encodings {_store(tmp_path).path.name} (its rows hold "
        f"{2 * WIDTH} numbers, the model's {WIDTH}); encoding anew."
    ]
    index = cascade.index
    assert index is not None
    assert index.encoded_texts == len(DOCS)
    message = "handle request number 7"
    assert index.match(message) == SemanticMatcher(_Runs(), DOCS).match(message)
    with np.load(_store(tmp_path).path) as data:
        assert data["vectors"].shape == (len(DOCS), WIDTH)
        assert data["pieces"].shape[1] == WIDTH
