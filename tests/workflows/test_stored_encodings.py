"""A semantic index's encodings on disk: a restart reads them instead of the model."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.workflows.matching.lexical import MatchDocument
from aptix.workflows.matching.semantic import (
    DEFAULT_MODEL,
    MODELS,
    OnnxEmbedder,
    SemanticMatcher,
    forget_built,
    load_embedder,
    model_file,
)
from aptix.workflows.matching.stored import StoredEncodings
from tests.logs import records_of
from tests.workflows.test_match_evidence import IT_AND_GREETING

DOCS = [
    *IT_AND_GREETING,
    MatchDocument("odd", "greet me \x1b[2J 🙂 with a lone \ud800 surrogate"),
    MatchDocument("odd", "..."),  # no word pieces at all
]
MESSAGE = "I need a new laptop, mine broke"
OWNERS = ["greet_user", "it_equipment", "odd"]


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return load_embedder()


@pytest.fixture(autouse=True)
def _first_in_the_process() -> Iterator[None]:
    """Each test counts what a first build encodes: no earlier index of the process lends."""
    forget_built()
    yield
    forget_built()


def _store(tmp_path: Path) -> StoredEncodings:
    return StoredEncodings(tmp_path, DEFAULT_MODEL, MODELS[DEFAULT_MODEL].sha256)


def test_a_second_index_of_the_catalog_reads_the_file_and_runs_no_model(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    first = SemanticMatcher(embedder, DOCS, _store(tmp_path))
    assert first.encoded_texts == len(DOCS)
    assert _store(tmp_path).path.is_file()
    forget_built()  # a restart: what spares the model now is the file alone
    again = SemanticMatcher(embedder, DOCS, _store(tmp_path))
    assert again.encoded_texts == 0
    assert np.array_equal(again.evidence(MESSAGE, OWNERS), first.evidence(MESSAGE, OWNERS))
    assert np.array_equal(again.coverage(MESSAGE, OWNERS), first.coverage(MESSAGE, OWNERS))
    assert again.match(MESSAGE) == first.match(MESSAGE)


def test_a_changed_workflow_is_read_through_the_model_again_and_stored(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    SemanticMatcher(embedder, DOCS, _store(tmp_path))
    changed = [*DOCS, MatchDocument("greet_user", "introduce yourself")]
    forget_built()
    matcher = SemanticMatcher(embedder, changed, _store(tmp_path))
    # The new text, then the greeting's three others for their token states; the rest read.
    assert matcher.encoded_texts == 4
    fresh = SemanticMatcher(embedder, changed)
    assert np.allclose(matcher.evidence(MESSAGE, OWNERS), fresh.evidence(MESSAGE, OWNERS))
    forget_built()
    assert SemanticMatcher(embedder, changed, _store(tmp_path)).encoded_texts == 0


def test_an_unreadable_file_is_ignored_with_one_warning_and_written_anew(
    embedder: OnnxEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path)
    SemanticMatcher(embedder, DOCS, store)
    whole = store.path.read_bytes()
    with np.load(store.path) as data:
        arrays = dict(data)
    narrower = tmp_path / "narrower.npz"
    np.savez(narrower, **{**arrays, "pieces": arrays["pieces"][:, :10]})
    for broken in (whole[: len(whole) // 2], b"not a zip", b"", narrower.read_bytes()):
        store.path.write_bytes(broken)
        forget_built()  # a restarted process: only the file could spare the model
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="aptix.workflows"):
            matcher = SemanticMatcher(embedder, DOCS, _store(tmp_path))
        assert matcher.encoded_texts == len(DOCS)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "Ignoring the stored encodings" in warnings[0]
        forget_built()
        assert SemanticMatcher(embedder, DOCS, _store(tmp_path)).encoded_texts == 0


def test_another_model_never_reads_the_file(tmp_path: Path) -> None:
    spec = MODELS[DEFAULT_MODEL]
    ours = StoredEncodings(tmp_path, DEFAULT_MODEL, spec.sha256)
    retuned = StoredEncodings(tmp_path, DEFAULT_MODEL, "f" * 64)
    assert ours.path != retuned.path
    assert ours.path.parent == retuned.path.parent == tmp_path


def test_an_orgs_own_index_leaves_the_file_alone(embedder: OnnxEmbedder, tmp_path: Path) -> None:
    store = _store(tmp_path)
    deployment = SemanticMatcher(embedder, DOCS, store)
    written = store.path.read_bytes()
    org = deployment.sibling()
    org.build([*DOCS, MatchDocument("org_only", "file an expense claim")])
    assert org.encoded_texts == 1
    assert store.path.read_bytes() == written


def settled_encodings(runtime: Runtime) -> tuple[int, int]:
    """How many texts ``runtime``'s two indexes encoded, once both serve its catalog."""
    registry = runtime.workflows.registry
    assert registry.settle(None, 120) is True
    matcher = registry.matcher
    assert matcher.semantic is not None
    assert matcher.cascade is not None
    assert matcher.cascade.index is not None
    return matcher.semantic.encoded_texts, matcher.cascade.index.encoded_texts


async def test_a_restarted_runtime_reads_both_indexes_from_its_data_dir(tmp_path: Path) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False)
    encoded: list[tuple[int, int]] = []
    for _ in range(2):
        forget_built()  # each start is a new process's: only the data dir is kept
        async with open_runtime(settings) as runtime:
            encoded.append(settled_encodings(runtime))
    # The first start encodes the built-in catalog with both models; the second reads it.
    assert encoded[0][0] > 0
    assert encoded[0][1] > 0
    assert encoded[1] == (0, 0)
    names = sorted(p.name for p in (tmp_path / "index").glob("*.npz"))
    assert [n.split("-")[0] for n in names] == ["minilm", "mpnet"]


def test_two_processes_storing_at_once_leave_a_file_a_third_reads(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    # Each process builds the same catalog's index and writes the file at about the same
    # time; the last rename wins, and no reader ever sees half a file.
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from aptix.workflows.matching.lexical import MatchDocument\n"
        "from aptix.workflows.matching.semantic import DEFAULT_MODEL, MODELS, SemanticMatcher,"
        " load_embedder\n"
        "from aptix.workflows.matching.stored import StoredEncodings\n"
        "docs = [MatchDocument(f'flow_{i}', f'request number {i} for the {i % 7} team')"
        " for i in range(300)]\n"
        "store = StoredEncodings(Path(sys.argv[1]), DEFAULT_MODEL, MODELS[DEFAULT_MODEL].sha256)\n"
        "print(SemanticMatcher(load_embedder(), docs, store).encoded_texts)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert [out.strip() for out, _ in outputs] == ["300", "300"]
    third = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert third.stdout.strip() == "0"
    assert "Ignoring" not in third.stderr
    assert [p.name for p in tmp_path.iterdir()] == [_store(tmp_path).path.name]


def test_a_save_sweeps_what_a_killed_writer_left_but_not_a_live_writers_file(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    import os
    import time

    store = _store(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    left = tmp_path / f".{store.path.stem}.4242.1"
    live = tmp_path / f".{store.path.stem}.4343.1"
    other = tmp_path / ".another-model-v1.4242.1"
    for path in (left, live, other):
        path.write_bytes(b"half a file")
    hours_ago = time.time() - 2 * 3600
    for path in (left, other):
        os.utime(path, (hours_ago, hours_ago))
    SemanticMatcher(embedder, DOCS, store)
    assert not left.exists()
    assert live.exists()
    assert other.exists()  # another model's files are its own store's to sweep


def _widened(arrays: dict[str, np.ndarray], width: int) -> dict[str, np.ndarray]:
    """``arrays`` with vectors and pieces of ``width`` numbers a row, still unit rows."""
    out = dict(arrays)
    for name in ("vectors", "pieces"):
        rows = np.resize(arrays[name], (len(arrays[name]), width)).astype(np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        out[name] = (rows / np.where(norms > 0, norms, 1.0)).astype(arrays[name].dtype)
    return out


def _width(path: Path) -> tuple[int, int]:
    with np.load(path) as data:
        return data["vectors"].shape[1], data["pieces"].shape[1]


def test_a_file_of_another_width_is_ignored_with_one_warning_and_written_anew(
    embedder: OnnxEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path)
    first = SemanticMatcher(embedder, DOCS, store)
    with np.load(store.path) as data:
        arrays = dict(data)
    # Another model's file under this one's name (mpnet's rows are 768 wide): every array
    # fits the others, only the width is not the model's.
    for width in (768, 192):
        np.savez(store.path, **_widened(arrays, width))
        forget_built()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="aptix.workflows"):
            matcher = SemanticMatcher(embedder, DOCS, _store(tmp_path))
        assert matcher.encoded_texts == len(DOCS)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [
            f"Ignoring the stored encodings {store.path.name} (its rows hold {width} numbers, "
            "the model's 384); encoding anew."
        ]
        assert matcher.match(MESSAGE) == first.match(MESSAGE)
        assert np.array_equal(matcher.evidence(MESSAGE, OWNERS), first.evidence(MESSAGE, OWNERS))
        assert _width(store.path) == (384, 384)
        # Nor does the process keep the other width for the next index of the catalog.
        assert SemanticMatcher(embedder, DOCS, _store(tmp_path / "other")).encoded_texts == 0
        forget_built()
        assert SemanticMatcher(embedder, DOCS, _store(tmp_path)).encoded_texts == 0
    assert embedder.width == 384  # the model's own, as its graph declares it


async def test_index_files_swapped_between_the_models_are_rebuilt_and_matching_works(
    tmp_path: Path,
) -> None:
    """Each model's file under the other's name (review r7 F1): rebuilt, never a 500."""
    message = "I want to write a new workflow for invoices"
    folder = tmp_path / "first" / "index"
    async with open_runtime(
        AptixSettings(data_dir=tmp_path / "first", load_plugins=False)
    ) as runtime:
        settled_encodings(runtime)
        expected = runtime.workflows.registry.match(message)
    minilm, mpnet = sorted(folder.glob("*.npz"))
    assert [minilm.name[:6], mpnet.name[:5]] == ["minilm", "mpnet"]
    held = minilm.read_bytes()
    minilm.write_bytes(mpnet.read_bytes())
    mpnet.write_bytes(held)
    forget_built()  # a restart: only the data dir is kept
    # open_runtime's logging does not propagate to pytest's capture.
    with records_of("aptix.workflows", logging.WARNING) as logged:
        async with open_runtime(
            AptixSettings(data_dir=tmp_path / "first", load_plugins=False)
        ) as runtime:
            encoded = settled_encodings(runtime)
            matcher = runtime.workflows.registry.matcher
            indexes = [matcher.semantic, matcher.cascade.index if matcher.cascade else None]
            for index in indexes:
                assert index is not None
                owners = [owner for owner, _ in index.match(message)]
                assert owners
                assert index.evidence(message, owners).shape == (len(owners), 6)
            assert runtime.workflows.registry.match(message) == expected
    assert min(encoded) > 0
    ignored = sorted(r.getMessage() for r in logged if "Ignoring" in r.getMessage())
    assert ignored == [
        f"Ignoring the stored encodings {minilm.name} (its rows hold 768 numbers, the model's "
        "384); encoding anew.",
        f"Ignoring the stored encodings {mpnet.name} (its rows hold 384 numbers, the model's "
        "768); encoding anew.",
    ]
    assert [_width(minilm), _width(mpnet)] == [(384, 384), (768, 768)]
    # The next runtime of the process takes the rebuilt encodings, each of its model's width.
    async with open_runtime(
        AptixSettings(data_dir=tmp_path / "second", load_plugins=False)
    ) as runtime:
        assert settled_encodings(runtime) == (0, 0)
        assert runtime.workflows.registry.match(message) == expected
    forget_built()
    async with open_runtime(
        AptixSettings(data_dir=tmp_path / "first", load_plugins=False)
    ) as runtime:
        assert settled_encodings(runtime) == (0, 0)


def test_a_model_whose_graph_leaves_its_width_unnamed_is_measured_by_one_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import onnxruntime

    real = onnxruntime.InferenceSession

    class _Unnamed:
        """A session whose token output's width is a symbol, as some exports leave it."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._inner = real(*args, **kwargs)

        def get_inputs(self) -> Any:
            return self._inner.get_inputs()

        def get_outputs(self) -> list[SimpleNamespace]:
            return [
                SimpleNamespace(name=o.name, shape=[*o.shape[:-1], "hidden"])
                for o in self._inner.get_outputs()
            ]

        def run(self, *args: Any) -> Any:
            return self._inner.run(*args)

    monkeypatch.setattr(onnxruntime, "InferenceSession", _Unnamed)
    assert OnnxEmbedder(model_file(MODELS[DEFAULT_MODEL])).width == 384
