"""Fit the shipped ranker and gate (``routing.json``) on the development set only.

Run: ``python -m bench.fit_routing``. Deterministic (Newton's method from zero weights, no
sampling but the seeded folds); it reads ``tests/workflows/matchset/messages.yaml`` and the
evaluation catalog, never the held-out sets, and needs the ``semantic`` extra for the
semantic configuration. ``python -m bench.workflows`` reports how the result does on folds
and on the held-out sets.
"""

from __future__ import annotations

import json

from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.matching.routing import WEIGHTS_FILE
from aptix.workflows.matching.semantic import SemanticMatcher, load_embedder
from bench.match_eval import collect, eval_catalog, fit_routing, placeholder, registry_for
from tests.workflows.matchset import labelled


def main() -> None:
    """Fit both configurations on every development message and write ``routing.json``."""
    rows = labelled()
    payload = {}
    for name, matcher in (
        ("lexical", WorkflowMatcher(model=placeholder(False))),
        ("semantic", WorkflowMatcher(SemanticMatcher(load_embedder()), placeholder(True))),
    ):
        registry_for(eval_catalog(), matcher)
        evidence = collect(matcher, rows)
        payload[name] = fit_routing(evidence, rows, range(len(rows))).to_json()
    WEIGHTS_FILE.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {WEIGHTS_FILE} from {len(rows)} development messages")


if __name__ == "__main__":
    main()
