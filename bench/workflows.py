"""Workflow matching: held-out accuracy (k-fold, leave-one-workflow-out), distractors, latency.

Run: ``python -m bench.workflows [--sizes 100,1000,10000] [--queries 300] [--no-semantic]
[--fit] [--misses]``.

Accuracy is measured only on messages the fusion model was not fitted on (see
:mod:`bench.match_eval`). ``--fit`` refits the shipped weights (``fusion.json``) on every
labelled message, after the folds have been reported.

Latency is per ``WorkflowRegistry.match`` call with a distinct message each time (no query
cache hits), after the index is built. The semantic row includes encoding the message
("encode p50" is that part alone; "search p50" is the rest, with the message already
encoded). Pattern embeddings of the synthetic catalogs are cached on disk in the user cache
directory, so only the first run pays for encoding 10,000 workflows' texts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import platformdirs

from aptix.workflows.loader import load_builtin
from aptix.workflows.matching.combined import MATCH_THRESHOLD, Candidates, WorkflowMatcher
from aptix.workflows.matching.fusion import FUSED_FEATURES, LEXICAL_FEATURES, WEIGHTS_FILE
from aptix.workflows.matching.semantic import (
    DEFAULT_MODEL,
    MODELS,
    Embedder,
    SemanticMatcher,
    Vectors,
    load_embedder,
)
from aptix.workflows.registry import WorkflowRegistry
from bench._table import print_table
from bench.match_eval import (
    Fold,
    Matrix,
    Scores,
    collect,
    embeddings,
    eval_catalog,
    fit_model,
    fit_request,
    kfold,
    leave_one_workflow_out,
    registry_for,
    run_folds,
    with_request,
)
from tests.workflows.evalset import EVAL_MESSAGES, evaluate, synthetic_catalog, synthetic_messages
from tests.workflows.evalset import eval_catalog as legacy_catalog
from tests.workflows.matchset import labelled

SEMANTIC_ONLY = ("sem", "sem_margin", "sem_top", "negated", "info_question", "short")


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

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        texts = np.array(list(self._cache), dtype=str)
        tmp = self._path.with_suffix(".tmp.npz")
        np.savez(tmp, texts=texts, vectors=np.vstack(list(self._cache.values())))
        tmp.replace(self._path)


def cached_embedder(model: str) -> DiskCachedEmbedder:
    """The named model with its on-disk cache of catalog texts."""
    cache = Path(platformdirs.user_cache_dir("aptix")) / "bench"
    key = hashlib.sha1(f"onnx:{model}".encode()).hexdigest()[:8]
    return DiskCachedEmbedder(load_embedder(model), cache / f"emb-{key}.npz")


def percentiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 of ``samples``."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


def time_calls(fn: Callable[[str], object], messages: Sequence[str]) -> list[float]:
    """Milliseconds per call of ``fn`` on each message, after a short warm-up."""
    for message in messages[:10]:
        fn(message + " warm")
    samples = []
    for message in messages:
        started = time.perf_counter_ns()
        fn(message)
        samples.append((time.perf_counter_ns() - started) / 1e6)
    return samples


def _rates(s: Scores) -> list[str]:
    correct = s.top1 + s.rejected
    total = s.on_topic + s.off_topic
    return [
        f"{s.top1_rate:.3f}",
        f"{s.top3_rate:.3f}",
        f"{s.rejection_rate:.3f}",
        f"{correct / total:.3f}",
    ]


def fold_rows(
    embedders: dict[str, DiskCachedEmbedder], show_misses: bool
) -> tuple[list[list[object]], list[list[object]]]:
    """Summary rows per protocol and configuration, and per-fold rows of the default model."""
    rows = labelled()
    catalog = eval_catalog()
    lexical = WorkflowMatcher()
    registry_for(catalog, lexical)
    configs: list[tuple[str, list[Candidates], tuple[str, ...], Matrix | None]] = [
        ("lexical", collect(lexical, rows), LEXICAL_FEATURES, None)
    ]
    for name, embedder in embedders.items():
        fused = WorkflowMatcher(SemanticMatcher(embedder))
        registry_for(catalog, fused)
        found = collect(fused, rows)
        vectors = embeddings(fused, rows)
        configs.append((f"semantic only ({name})", found, SEMANTIC_ONLY, None))
        configs.append((f"fused ({name})", found, FUSED_FEATURES, vectors))
    protocols: list[tuple[str, list[Fold]]] = [
        ("5-fold", kfold(rows)),
        ("leave-one-workflow-out", leave_one_workflow_out(rows)),
    ]
    summary: list[list[object]] = []
    per_fold: dict[tuple[str, str], dict[str, Scores]] = {}
    for protocol, folds in protocols:
        for label, cands, features, vectors in configs:
            scores = {}

            def keep(fold: Fold, result: Scores, into: dict[str, Scores] = scores) -> None:
                into[fold.name] = result

            total = run_folds(folds, cands, rows, features, keep, vectors)
            per_fold[(protocol, label)] = scores
            summary.append([protocol, label, *_rates(total)])
            if show_misses and label.startswith("fused") and protocol == "5-fold":
                for miss in total.misses:
                    print("   miss:", miss)
    detail: list[list[object]] = []
    fused_label = f"fused ({DEFAULT_MODEL})"
    for protocol, folds in protocols:
        if (protocol, fused_label) not in per_fold:
            break
        worse = 0
        for fold in folds:
            lex = per_fold[(protocol, "lexical")][fold.name]
            both = per_fold[(protocol, fused_label)][fold.name]
            lex_ok, both_ok = lex.top1 + lex.rejected, both.top1 + both.rejected
            worse += both_ok < lex_ok
            if protocol == "5-fold" or both_ok < lex_ok:
                detail.append(
                    [protocol, fold.name, *_rates(lex)[::2], *_rates(both)[::2], both_ok - lex_ok]
                )
        detail.append([protocol, f"folds where fused < lexical: {worse}", "", "", "", "", ""])
    return summary, detail


def distractor_rows(embedder: DiskCachedEmbedder | None) -> list[list[object]]:
    """5-fold figures with 1,000 synthetic workflows served beside the evaluation catalog."""
    rows = labelled()
    catalog = eval_catalog() + synthetic_catalog(1000)
    configs: list[tuple[str, WorkflowMatcher, tuple[str, ...]]] = [
        ("lexical", WorkflowMatcher(), LEXICAL_FEATURES)
    ]
    if embedder is not None:
        configs.append(("fused", WorkflowMatcher(SemanticMatcher(embedder)), FUSED_FEATURES))
    out: list[list[object]] = []
    for label, matcher, features in configs:
        registry_for(catalog, matcher)
        vectors = embeddings(matcher, rows) if matcher.semantic is not None else None
        total = run_folds(kfold(rows), collect(matcher, rows), rows, features, None, vectors)
        out.append([f"{len(catalog):,} workflows, 5-fold", label, *_rates(total)])
    return out


def legacy_rows(embedder: DiskCachedEmbedder | None) -> list[list[object]]:
    """The shipped weights on the older 40-workflow set, which they were never fitted on."""
    builtin = [item.manifest for item in load_builtin()[0]]
    configs: list[tuple[str, WorkflowMatcher]] = [("lexical", WorkflowMatcher())]
    if embedder is not None:
        configs.append(("fused", WorkflowMatcher(SemanticMatcher(embedder))))
    out: list[list[object]] = []
    for label, matcher in configs:
        registry = WorkflowRegistry(builtin + legacy_catalog(), matcher=matcher)
        report = evaluate(lambda m, r=registry: [x.workflow_id for x in r.match(m)])
        total = report.on_topic + report.off_topic
        out.append(
            [
                f"{len(EVAL_MESSAGES)} messages, 46 workflows",
                label,
                f"{report.top1_accuracy:.3f}",
                f"{report.top3_accuracy:.3f}",
                f"{report.rejection_rate:.3f}",
                f"{(report.top1 + report.rejected) / total:.3f}",
            ]
        )
    return out


def latency_rows(
    sizes: Sequence[int], queries: int, embedder: DiskCachedEmbedder | None
) -> list[list[object]]:
    """p50/p99 per match call at each catalog size, lexical and fused."""
    rows: list[list[object]] = []
    for size in sizes:
        catalog = synthetic_catalog(size)
        messages = synthetic_messages(catalog, queries)
        kinds: list[tuple[str, WorkflowMatcher]] = [("lexical", WorkflowMatcher())]
        if embedder is not None:
            kinds.append(("fused", WorkflowMatcher(SemanticMatcher(embedder))))
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
                search_p50, _ = percentiles(time_calls(registry.match, sample))
                encode, search = f"{enc_p50:.2f}", f"{search_p50:.2f}"
            rows.append(
                [f"{size:,}", kind, f"{p50:.2f}", f"{p99:.2f}", encode, search, f"{build_s:.2f}"]
            )
    return rows


def model_rows(names: Sequence[str]) -> list[list[object]]:
    """Load time and single-message encoding time of each model."""
    out: list[list[object]] = []
    for name in names:
        started = time.perf_counter()
        embedder = load_embedder(name)
        embedder.encode(["warm up"])
        load_s = time.perf_counter() - started
        messages = [f"please fix the bug in module {i}" for i in range(100)]
        p50, p99 = percentiles(time_calls(lambda m, e=embedder: e.encode([m]), messages))
        out.append([name, MODELS[name].description, f"{load_s:.2f}", f"{p50:.2f}", f"{p99:.2f}"])
    return out


def first_match_ms(semantic: bool) -> float:
    """Start-up as the server does it (model load, index, warm-up), then one new message."""
    from aptix.workflows.services import build_workflow_services

    services = build_workflow_services(semantic=semantic)
    services.registry.reset([item.manifest for item in load_builtin()[0]] + list(eval_catalog()))
    services.warm_up()
    started = time.perf_counter_ns()
    services.registry.match("new decision record please, topic is rate limiting")
    return (time.perf_counter_ns() - started) / 1e6


def main() -> None:
    """Print every table; with ``--fit``, refit ``fusion.json`` afterwards."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--no-semantic", action="store_true")
    parser.add_argument("--fit", action="store_true", help="refit fusion.json on all messages")
    parser.add_argument("--misses", action="store_true", help="print held-out misses")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    embedders = {} if args.no_semantic else {name: cached_embedder(name) for name in MODELS}
    default = embedders.get(DEFAULT_MODEL)
    rows = labelled()
    # Latency depends on what else runs: the load average says how busy the machine was.
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start")
    print(
        f"match threshold {MATCH_THRESHOLD} (a calibrated probability); {len(rows)} labelled "
        f"messages ({sum(r.expected is None for r in rows)} off-topic) over "
        f"{len({r.expected for r in rows} - {None})} workflows"
    )
    header = ["top-1", "top-3", "off-topic rejected", "all decisions"]
    summary, detail = fold_rows(embedders, args.misses)
    print_table(
        "held-out accuracy (fusion fitted on training folds only)",
        ["protocol", "matcher", *header],
        summary,
    )
    if detail:
        print_table(
            "per fold: lexical vs fused (default model)",
            [
                "protocol",
                "fold",
                "lex top-1",
                "lex rejected",
                "fused top-1",
                "fused rejected",
                "decisions +/-",
            ],
            detail,
        )
    print_table(
        "with 1,000 synthetic distractor workflows",
        ["catalog", "matcher", *header],
        distractor_rows(default),
    )
    print_table(
        "shipped weights on the older labelled set (never fitted on it)",
        ["set", "matcher", *header],
        legacy_rows(default),
    )
    if embedders:
        print_table(
            "semantic models compared",
            ["model", "what", "load (s)", "encode p50 ms", "encode p99 ms"],
            model_rows(list(embedders)),
        )
    print_table(
        "match_workflow latency (ms, distinct messages)",
        ["workflows", "matcher", "p50", "p99", "encode p50", "search p50", "index build (s)"],
        latency_rows(sizes, args.queries, default),
    )
    first = [["lexical", f"{first_match_ms(False):.2f}"]]
    if default is not None:
        first.append(["fused", f"{first_match_ms(True):.2f}"])
    print_table("first match after start-up is ready (ms)", ["matcher", "first match"], first)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if args.fit:
        fit(default)


def fit(embedder: DiskCachedEmbedder | None) -> None:
    """Refit the shipped weights on every labelled message and write ``fusion.json``."""
    if embedder is None:
        raise SystemExit("--fit needs the semantic model (drop --no-semantic)")
    rows = labelled()
    lexical, fused = WorkflowMatcher(), WorkflowMatcher(SemanticMatcher(embedder))
    registry_for(eval_catalog(), lexical)
    registry_for(eval_catalog(), fused)
    vectors = embeddings(fused, rows)
    everyone = list(range(len(rows)))
    # The fusion model learns from out-of-fold request probabilities, like those of new messages.
    fused_cands = with_request(collect(fused, rows), vectors, rows, everyone, [])
    payload = {
        "lexical": fit_model(collect(lexical, rows), rows, LEXICAL_FEATURES).to_json(),
        "fused": fit_model(fused_cands, rows, FUSED_FEATURES).to_json(),
        "request": fit_request(vectors, rows).to_json(),
    }
    WEIGHTS_FILE.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {WEIGHTS_FILE}")


if __name__ == "__main__":
    main()
