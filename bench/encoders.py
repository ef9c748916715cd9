"""The encoders the benchmarks read the training sets through, with an on-disk cache.

The shipped encoder was tuned on every training set (:mod:`bench.tune_encoder`), so a
training set's own messages are close to its workflows under it. Whatever is fitted or
scored on a training set reads it through the model tuned on the *other* sets instead
(:func:`fold_embedder`): the cross-fitting that keeps the folds and the routing fit honest.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import platformdirs

from aptix.workflows.matching.semantic import (
    MODELS,
    Embedder,
    Encoded,
    OnnxEmbedder,
    TokenEmbedder,
    Vectors,
    encoded,
    encoded_many,
    load_embedder,
)

CACHE = Path(platformdirs.user_cache_dir("aptix")) / "bench"
#: How texts are encoded (one at a time since the sixth round): part of every cache key.
ENCODING = "one-at-a-time"


class DiskCachedEmbedder:
    """Wraps an embedder with a text -> vector cache kept in one ``.npz`` file."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self._inner = inner
        self._path = path
        self._cache: dict[str, Vectors] = {}
        if path.exists():
            with np.load(path, allow_pickle=False) as data:
                self._cache = dict(zip(data["texts"].tolist(), data["vectors"], strict=True))

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode ``texts``; single texts (queries) always pay the real cost."""
        if len(texts) == 1:
            return self._inner.encode(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            started = time.perf_counter()
            vectors = self._inner.encode(missing)
            print(f"  encoded {len(missing)} texts in {time.perf_counter() - started:.0f} s")
            self._cache.update(zip(missing, vectors, strict=True))
            self._save()
        return np.vstack([self._cache[t] for t in texts])

    def encode_tokens(self, text: str) -> Encoded:
        """The inner model's vector and token states for ``text`` (not cached)."""
        return encoded(self._inner, text)

    def encode_tokens_many(self, texts: Sequence[str]) -> list[Encoded]:
        """The inner model's vectors and token states for ``texts``, batched if it can be."""
        if isinstance(self._inner, TokenEmbedder):
            return encoded_many(self._inner, texts)
        return [encoded(self._inner, text) for text in texts]

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        texts = np.array(list(self._cache), dtype=str)
        tmp = self._path.with_suffix(".tmp.npz")
        np.savez(tmp, texts=texts, vectors=np.vstack(list(self._cache.values())))
        tmp.replace(self._path)


def cached_embedder(model: str) -> DiskCachedEmbedder:
    """The named model with its on-disk cache of catalog texts (keyed by the file's hash)."""
    # The name alone would hand a retuned model the vectors of the file it replaced.
    key = hashlib.sha1(f"onnx:{model}:{MODELS[model].sha256}:{ENCODING}".encode()).hexdigest()[:8]
    return DiskCachedEmbedder(load_embedder(model), CACHE / f"emb-{key}.npz")


def fold_file(name: str) -> Path:
    """The encoder tuned on every training set but ``name`` (written by bench.tune_encoder)."""
    return CACHE / "encoder" / f"without-{name}.onnx"


def fold_embedder(name: str) -> DiskCachedEmbedder:
    """The encoder that never saw training set ``name``; SystemExit when it was not tuned."""
    path = fold_file(name)
    if not path.is_file():
        raise SystemExit(
            f"{path} is missing: the training sets are read through encoders tuned without "
            "them. Run python -m bench.tune_encoder (see its docstring) first."
        )
    key = hashlib.sha256(path.read_bytes() + ENCODING.encode()).hexdigest()[:12]
    return DiskCachedEmbedder(OnnxEmbedder(path), CACHE / f"emb-fold-{name}-{key}.npz")
