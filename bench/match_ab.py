"""Workflow matching, this tree against an earlier revision, in one process.

Run: ``python -m bench.match_ab REV [--sizes 100,1000,10000] [--queries 400] [--semantic]``,
or ``python -m bench.match_ab REV --evidence [--semantic]``.

The machines these benchmarks run on are shared: one run's latency can be 1.5 times
another's. This bench takes ``aptix`` at ``REV`` from git (``git archive``) into a temporary
directory under another package name, builds both matchers on the same synthetic catalog
and times ``WorkflowRegistry.match`` for each message with both, alternating which goes
first. Both see the same load, so the ratio holds where the absolute figures drift. It
also counts the messages for which the two return other workflows or another order (a
change meant to be only faster should show none), and prints the first few.

The synthetic catalog has a 77-word vocabulary and many near-duplicate workflows, so it says
little about the catalogs people write. ``--evidence`` times nothing: it builds both trees'
matchers on each catalog the routing figures are read on (every training set with the
built-in workflows, each again beside 1,000 synthetic workflows, the evaluation catalog with
round 1 and round 3's messages, and round 2 and round 4's held-out catalogs) and counts, per
catalog, the messages whose evidence (candidates, every ranker and gate feature, to the last
bit) or decision (the ranker's order and probabilities, the gate) differs. A change meant to
leave every score alone should show none anywhere.

Those are its targets: no message with other matches (timing) or other evidence or decisions
(``--evidence``). Like ``diff``, the exit status is 1 when a message differs, with every
differing row listed at the end; the timings themselves state no target.
"""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.registry import WorkflowRegistry
from bench._table import Targets, bench_parser, positive_int, positive_ints, print_table, verdict
from tests.workflows.evalset import SYNTHETIC_LIMIT, synthetic_catalog, synthetic_messages

#: The earlier revision's package name, so that both import side by side.
OTHER = "aptix_then"
ROOT = Path(__file__).resolve().parent.parent
#: Messages with different matches printed per catalog size (all are counted).
SHOWN_DIFFERENCES = 3


def import_revision(rev: str, into: Path) -> ModuleType:
    """``aptix`` at ``rev``, importable as :data:`OTHER` from ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "src/aptix"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    package = into / OTHER
    (into / "src" / "aptix").rename(package)
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"\baptix(?=[.\s])", OTHER, text), encoding="utf-8")
    sys.path.insert(0, str(into))
    return importlib.import_module(OTHER)


def _then(name: str) -> Any:
    module, _, attribute = name.rpartition(".")
    return getattr(importlib.import_module(f"{OTHER}.{module}"), attribute)


def _percentile(samples: list[int], q: float) -> float:
    ordered = sorted(samples)
    return ordered[int(q * (len(ordered) - 1))] / 1e6


def compare(size: int, queries: int, semantic: bool) -> list[object]:
    """One table row: p50 and p99 of both, and the ratio of the p50s."""
    catalog = synthetic_catalog(size)
    messages = synthetic_messages(catalog, queries)
    manifest = _then("workflows.manifest.WorkflowManifest")
    then_catalog = [manifest.model_validate(m.model_dump()) for m in catalog]
    now_semantic = then_semantic = None
    if semantic:
        from aptix.workflows.matching.semantic import DEFAULT_MODEL, SemanticMatcher
        from bench.encoders import cached_embedder

        embedder = cached_embedder(DEFAULT_MODEL)
        now_semantic = SemanticMatcher(embedder)
        then_semantic = _then("workflows.matching.semantic.SemanticMatcher")(embedder)
    registries = {
        "then": _then("workflows.registry.WorkflowRegistry")(
            then_catalog,
            matcher=_then("workflows.matching.combined.WorkflowMatcher")(then_semantic),
        ),
        "now": WorkflowRegistry(catalog, matcher=WorkflowMatcher(now_semantic)),
    }
    for registry in registries.values():
        registry.match("build the index")
    samples: dict[str, list[int]] = {name: [] for name in registries}
    differing = 0
    for i, message in enumerate(messages):
        order = list(registries) if i % 2 else list(registries)[::-1]
        found: dict[str, list[str]] = {}
        for name in order:
            started = time.perf_counter_ns()
            matches = registries[name].match(message)
            samples[name].append(time.perf_counter_ns() - started)
            found[name] = [m.workflow_id for m in matches]
        if found["then"] != found["now"]:
            differing += 1
            if differing <= SHOWN_DIFFERENCES:
                print(f"{size:,} workflows, different matches for {message!r}: {found}")
    then50, now50 = _percentile(samples["then"], 0.5), _percentile(samples["now"], 0.5)
    return [
        f"{size:,}",
        "semantic" if semantic else "lexical",
        f"{then50:.2f}",
        f"{_percentile(samples['then'], 0.99):.2f}",
        f"{now50:.2f}",
        f"{_percentile(samples['now'], 0.99):.2f}",
        f"{now50 / then50:.2f}",
        f"{differing} / {len(messages)}",
    ]


def _evidence_sets() -> list[tuple[str, list[Any], list[str]]]:
    """(name, catalog, messages) for every catalog the routing figures are read on."""
    from bench.match_eval import eval_catalog, with_builtin
    from tests.workflows import matchset

    crowd = synthetic_catalog(1000)
    sets: list[tuple[str, list[Any], list[str]]] = []
    for item in matchset.training_sets():
        messages = [row.message for row in item.rows]
        sets.append((item.name, with_builtin(item.catalog), messages))
        sets.append((f"{item.name} + 1,000", with_builtin(item.catalog) + crowd, messages))
    rows = [*matchset.fresh(), *matchset.nearmiss(), *matchset.chitchat(), *matchset.holdout3()]
    sets.append(("evaluation, rounds 1 and 3", eval_catalog(), [row.message for row in rows]))
    for item in (*matchset.holdout2(), *matchset.holdout4()):
        sets.append(
            (f"held out {item.name}", with_builtin(item.catalog), [r.message for r in item.rows])
        )
    return sets


def _same_evidence(now: Any, then: Any) -> bool:
    """Both trees' :class:`~aptix.workflows.matching.combined.Candidates` agree to the bit."""
    return (
        now.ids == then.ids
        and now.features.tobytes() == then.features.tobytes()
        and now.message.tobytes() == then.message.tobytes()
        and (now.stated, now.builtin, now.builtin_words)
        == (then.stated, then.builtin, then.builtin_words)
    )


def _built(package: str, catalog: list[Any], embedder: Any) -> Any:
    """A matcher of ``package`` (``aptix`` or :data:`OTHER`) indexing ``catalog``."""
    matching = f"{package}.workflows.matching"
    manifest = importlib.import_module(f"{package}.workflows.manifest").WorkflowManifest
    semantic = None
    if embedder is not None:
        semantic = importlib.import_module(f"{matching}.semantic").SemanticMatcher(embedder)
    matcher = importlib.import_module(f"{matching}.combined").WorkflowMatcher(semantic)
    matcher.rebuild([manifest.model_validate(m.model_dump()) for m in catalog])
    return matcher


def evidence_rows(semantic: bool) -> list[list[object]]:
    """Per catalog: messages whose evidence, and whose decision, differs between the trees."""
    embedder = None
    if semantic:
        from aptix.workflows.matching.semantic import DEFAULT_MODEL
        from bench.encoders import cached_embedder

        embedder = cached_embedder(DEFAULT_MODEL)
    rows: list[list[object]] = []
    for name, catalog, messages in _evidence_sets():
        now, then = (_built(package, catalog, embedder) for package in ("aptix", OTHER))
        evidence = decided = 0
        for message in messages:
            ours, theirs = now.candidates(message), then.candidates(message)
            if not _same_evidence(ours, theirs):
                evidence += 1
                if evidence <= SHOWN_DIFFERENCES:
                    print(f"{name}: other evidence for {message!r}")
            mine, before = now.decision(ours), then.decision(theirs)
            decided += (mine.ranked, mine.gate) != (before.ranked, before.gate)
        rows.append([name, f"{len(messages):,}", evidence, decided])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; the exit status is 1 when a message differs."""
    parser = bench_parser("bench.match_ab", __doc__)
    parser.add_argument("rev", help="the earlier revision (a commit, tag or branch)")
    parser.add_argument("--sizes", type=positive_ints, default="100,1000,10000")
    parser.add_argument("--queries", type=positive_int, default=400)
    parser.add_argument("--semantic", action="store_true", help="with the semantic extra")
    parser.add_argument(
        "--evidence",
        action="store_true",
        help="compare the evidence on the figures' catalogs instead of timing",
    )
    args = parser.parse_args(argv)
    targets = Targets("bench.match_ab")
    if max(args.sizes) > SYNTHETIC_LIMIT:
        parser.error(f"--sizes: the synthetic catalog has at most {SYNTHETIC_LIMIT:,} workflows")
    with tempfile.TemporaryDirectory() as folder:
        try:
            import_revision(args.rev, Path(folder))
        except subprocess.CalledProcessError as error:
            parser.exit(2, f"match_ab: cannot read {args.rev!r}: {error.stderr.decode().strip()}\n")
        if args.evidence:
            evidence = evidence_rows(args.semantic)
            met = True
            for name, _, other_evidence, other_decision in evidence:
                for what, count in (("evidence", other_evidence), ("decision", other_decision)):
                    met &= targets.at_most(f"other {what}, {name}", int(str(count)), 0, " messages")
            print_table(
                f"evidence and decisions, {args.rev!r} against this tree (messages that differ; "
                f"target: none): {verdict(met)}",
                ["catalog", "messages", "other evidence", "other decision"],
                evidence,
            )
            return targets.finish()
        rows = [compare(size, args.queries, args.semantic) for size in args.sizes]
    met = True
    for row in rows:
        differing = int(str(row[-1]).split(" / ", 1)[0])
        met &= targets.at_most(
            f"other matches, {row[0]} workflows {row[1]}", differing, 0, " messages"
        )
    print_table(
        f"match_workflow latency, {args.rev!r} against this tree (ms, alternating; other matches "
        f"target: none): {verdict(met)}",
        [
            "workflows",
            "matcher",
            "then p50",
            "then p99",
            "now p50",
            "now p99",
            "now / then",
            "other matches",
        ],
        rows,
    )
    return targets.finish()


if __name__ == "__main__":
    raise SystemExit(main())
