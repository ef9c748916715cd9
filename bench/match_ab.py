"""Workflow matching, this tree against an earlier revision, in one process.

Run: ``python -m bench.match_ab REV [--sizes 100,1000,10000] [--queries 400] [--semantic]``.

The machines these benchmarks run on are shared: one run's latency can be 1.5 times
another's. This bench takes ``aptix`` at ``REV`` from git (``git archive``) into a temporary
directory under another package name, builds both matchers on the same synthetic catalog
and times ``WorkflowRegistry.match`` for each message with both, alternating which goes
first. Both see the same load, so the ratio holds where the absolute figures drift. It
also counts the messages for which the two return other workflows or another order (a
change meant to be only faster should show none), and prints the first few.
"""

from __future__ import annotations

import argparse
import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.registry import WorkflowRegistry
from bench._table import positive_int, positive_ints, print_table
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


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("rev", help="the earlier revision (a commit, tag or branch)")
    parser.add_argument("--sizes", type=positive_ints, default="100,1000,10000")
    parser.add_argument("--queries", type=positive_int, default=400)
    parser.add_argument("--semantic", action="store_true", help="with the semantic extra")
    args = parser.parse_args()
    if max(args.sizes) > SYNTHETIC_LIMIT:
        parser.error(f"--sizes: the synthetic catalog has at most {SYNTHETIC_LIMIT:,} workflows")
    with tempfile.TemporaryDirectory() as folder:
        try:
            import_revision(args.rev, Path(folder))
        except subprocess.CalledProcessError as error:
            parser.exit(2, f"match_ab: cannot read {args.rev!r}: {error.stderr.decode().strip()}\n")
        rows = [compare(size, args.queries, args.semantic) for size in args.sizes]
    print_table(
        f"match_workflow latency, {args.rev} against this tree (ms, alternating)",
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


if __name__ == "__main__":
    main()
