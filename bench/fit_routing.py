"""Fit the shipped ranker and gate (``routing.json``) on the training sets only.

Run: ``python -m bench.fit_routing``. Deterministic (Newton's method from zero weights, no
sampling but the seeded folds); it reads the training sets of ``tests/workflows/matchset``
(the development catalog and messages, and the training catalogs under ``train/``), never
the held-out sets, and needs the ``semantic`` extra for the semantic configuration. The
semantic configuration reads each training set through the encoder tuned without it
(``python -m bench.tune_encoder`` writes them).
``python -m bench.workflows`` reports how the result does on folds and on the held-out sets.
"""

from __future__ import annotations

import json

from aptix.workflows.matching.combined import WorkflowMatcher
from aptix.workflows.matching.routing import WEIGHTS_FILE
from aptix.workflows.matching.semantic import SemanticMatcher
from bench.encoders import fold_embedder
from bench.match_eval import fit_routing, placeholder, set_evidence
from tests.workflows.matchset import training_sets


def main() -> None:
    """Fit both configurations on every training message and write ``routing.json``."""
    payload: dict[str, object] = {}
    for name, make in (
        ("lexical", lambda _: WorkflowMatcher(model=placeholder(False))),
        (
            "semantic",
            # Each set through the encoder tuned without it: the shipped encoder has seen
            # every set, and would hand the ranker cosines no new catalog gets.
            lambda item: WorkflowMatcher(
                SemanticMatcher(fold_embedder(item.name)), placeholder(True)
            ),
        ),
    ):
        evidence, rows, _ = set_evidence(make, training_sets())
        routing = fit_routing(evidence, rows, range(len(rows)))
        payload[name] = routing.to_json()
        # The same messages in both configurations: one form model, stored once.
        assert routing.form is not None
        payload["form"] = routing.form.to_json()
    WEIGHTS_FILE.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    sizes = ", ".join(f"{t.name} {len(t.rows)}" for t in training_sets())
    print(f"wrote {WEIGHTS_FILE} from the training sets ({sizes} messages)")


if __name__ == "__main__":
    main()
