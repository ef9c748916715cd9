"""``match_workflow`` latency over synthetic catalogs, and accuracy on the labelled set.

Run: ``python -m bench.workflows [--sizes 100,1000,10000] [--queries 300] [--no-semantic]``.

Latency is per ``WorkflowRegistry.match`` call with a distinct message each time (no query
cache hits), after the index is built. The semantic row includes encoding the message
("encode p50" shows that part alone: it does not depend on the catalog size; "search p50"
is the rest, measured with the message already encoded). Pattern
embeddings of the synthetic catalogs are cached on disk (in the user cache directory), since
encoding 10,000 workflows' texts takes minutes on a CPU; only the first run pays for it.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import platformdirs

from aptix.workflows.loader import load_builtin
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.combined import MATCH_THRESHOLD, WorkflowMatcher
from aptix.workflows.matching.semantic import SemanticMatcher, SentenceTransformerEmbedder, Vectors
from aptix.workflows.registry import WorkflowRegistry
from bench._table import print_table
from tests.workflows.evalset import (
    EVAL_MESSAGES,
    eval_catalog,
    evaluate,
    synthetic_catalog,
    synthetic_messages,
)


class DiskCachedEmbedder:
    """Wraps the real embedder with a text -> vector cache kept in one ``.npz`` file."""

    def __init__(self, inner: SentenceTransformerEmbedder, path: Path) -> None:
        self._inner = inner
        self._path = path
        self._cache: dict[str, Vectors] = {}
        if path.exists():
            with np.load(path, allow_pickle=False) as data:
                self._cache = dict(zip(data["texts"].tolist(), data["vectors"], strict=True))

    def encode(self, texts: Sequence[str]) -> Vectors:
        if len(texts) == 1:  # queries: never cached, always the real cost
            return self._inner.encode(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            started = time.perf_counter()
            vectors = self._inner.encode(missing)
            print(f"  encoded {len(missing)} texts in {time.perf_counter() - started:.0f} s")
            self._cache.update(zip(missing, vectors, strict=True))
            self._save()
        return np.vstack([self._cache[t] for t in texts])

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        texts = np.array(list(self._cache), dtype=str)
        tmp = self._path.with_suffix(".tmp.npz")
        np.savez(tmp, texts=texts, vectors=np.vstack(list(self._cache.values())))
        tmp.replace(self._path)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


def time_calls(fn: Callable[[str], object], messages: Sequence[str]) -> list[float]:
    for message in messages[:10]:  # warm-up (first call builds the index)
        fn(message + " warm")
    samples = []
    for message in messages:
        started = time.perf_counter_ns()
        fn(message)
        samples.append((time.perf_counter_ns() - started) / 1e6)
    return samples


def latency_rows(
    sizes: Sequence[int], queries: int, embedder: DiskCachedEmbedder | None
) -> list[list[object]]:
    rows: list[list[object]] = []
    for size in sizes:
        catalog = synthetic_catalog(size)
        messages = synthetic_messages(catalog, queries)
        kinds: list[tuple[str, WorkflowMatcher]] = [("lexical", WorkflowMatcher())]
        if embedder is not None:
            kinds.append(("lexical+semantic", WorkflowMatcher(SemanticMatcher(embedder))))
        for kind, matcher in kinds:
            registry = WorkflowRegistry(catalog, matcher=matcher)
            started = time.perf_counter()
            registry.match("build the index")
            build_s = time.perf_counter() - started
            p50, p99 = percentiles(time_calls(registry.match, messages))
            encode = search = "-"
            semantic = matcher.semantic
            if semantic is not None and embedder is not None:
                sample = messages[:100]
                enc_p50, _ = percentiles(time_calls(lambda m: embedder.encode([m]), sample))
                for message in sample:
                    semantic.embed_query(message)
                # The same messages again hit the query cache: what is left is the search.
                search_p50, _ = percentiles(time_calls(registry.match, sample))
                encode, search = f"{enc_p50:.2f}", f"{search_p50:.2f}"
            rows.append(
                [f"{size:,}", kind, f"{p50:.2f}", f"{p99:.2f}", encode, search, f"{build_s:.2f}"]
            )
            print(f"  {size:>6} {kind:<17} p50 {p50:.2f} ms  p99 {p99:.2f} ms")
    return rows


def accuracy_rows(embedder: DiskCachedEmbedder | None) -> list[list[object]]:
    builtin = [item.manifest for item in load_builtin()[0]]
    catalogs: list[tuple[str, list[WorkflowManifest]]] = [
        ("built-in + 40 hand-written", builtin + eval_catalog()),
        ("same + 1,000 synthetic distractors", builtin + eval_catalog() + synthetic_catalog(1000)),
    ]
    rows: list[list[object]] = []
    for label, catalog in catalogs:
        kinds: list[tuple[str, WorkflowMatcher]] = [("lexical", WorkflowMatcher())]
        if embedder is not None:
            kinds.append(("lexical+semantic", WorkflowMatcher(SemanticMatcher(embedder))))
        for kind, matcher in kinds:
            registry = WorkflowRegistry(catalog, matcher=matcher)
            report = evaluate(lambda m, r=registry: [x.workflow_id for x in r.match(m)])
            rows.append(
                [
                    label,
                    kind,
                    f"{report.top1_accuracy:.3f}",
                    f"{report.top3_accuracy:.3f}",
                    f"{report.rejection_rate:.3f}",
                    f"{report.on_topic}/{report.off_topic}",
                ]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--no-semantic", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    embedder = None
    if not args.no_semantic:
        cache = Path(platformdirs.user_cache_dir("aptix")) / "bench"
        key = hashlib.sha1(b"all-MiniLM-L6-v2").hexdigest()[:8]
        embedder = DiskCachedEmbedder(SentenceTransformerEmbedder(), cache / f"emb-{key}.npz")
    print(f"match threshold {MATCH_THRESHOLD}; {len(EVAL_MESSAGES)} labelled messages")
    latency = latency_rows(sizes, args.queries, embedder)
    print_table(
        "match_workflow latency (ms, distinct messages)",
        ["workflows", "matcher", "p50", "p99", "encode p50", "search p50", "index build (s)"],
        latency,
    )
    print_table(
        "accuracy on the labelled evaluation set",
        ["catalog", "matcher", "top-1", "top-3", "off-topic rejected", "on/off-topic"],
        accuracy_rows(embedder),
    )


if __name__ == "__main__":
    main()
