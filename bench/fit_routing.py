"""Fit the shipped ranker and gate (``routing.json``) on the training sets only.

Run: ``python -m bench.fit_routing``. Deterministic (Newton's method from zero weights, no
sampling but the seeded folds); it reads the training sets of ``tests/workflows/matchset``
(the development catalog and messages, and the training catalogs under ``train/``), never
the held-out sets, and needs the ``semantic`` extra for the semantic configuration. The
semantic configuration reads each training set through the encoder tuned without it
(``python -m bench.tune_encoder`` writes them; the shipped fit, since the twentieth round,
read them through three group encoders, ``--groups 3``).
``python -m bench.workflows`` reports how the result does on folds and on the held-out sets.

``--semantic-only`` refits the semantic configuration and the shared form model, and keeps
the lexical configuration with the form model it was fitted with (stored in its section):
the seventeenth round's new training catalogs helped the semantic path and not the lexical
one (docs/modes-and-workflows.md).

``--lexical-only`` does the reverse: it refits the lexical configuration (ranker, gate,
form, built-in and request word models, word associations; no encoder needed) and keeps
the semantic one with the shared form model (the twenty-seventh round's request word model
was shipped that way, and the twenty-ninth round's word associations).

``--builtin-only`` refits the built-in models alone and keeps the rest of the file;
``--lexical-builtin-only`` refits only the word model (of ``aptix.workflows.matching.words``,
which needs no encoder), read by both configurations: the twenty-seventh round added it to
the lexical one that way and the twenty-eighth to the semantic one, without moving the
rankers and gates that earlier rounds measured. Fold
encoders tuned on another machine differ in their last bits, which moves the semantic ranker
and gate weights by up to 0.05; the built-in model was added in the thirteenth round that
way, without moving the ranker and gate that earlier rounds measured.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from aptix.workflows.matching.combined import MAX_MATCH_CHARS, WorkflowMatcher
from aptix.workflows.matching.routing import WEIGHTS_FILE
from aptix.workflows.matching.semantic import SemanticMatcher
from bench.encoders import fold_embedder
from bench.match_eval import (
    fit_builtin,
    fit_builtin_words,
    fit_routing,
    placeholder,
    set_evidence,
)
from tests.workflows.matchset import TrainingSet, training_sets


def _semantic_matcher(item: TrainingSet) -> WorkflowMatcher:
    # Each set through the encoder tuned without it: the shipped encoder has seen every set,
    # and would hand the ranker cosines no new catalog gets.
    return WorkflowMatcher(SemanticMatcher(fold_embedder(item.name)), placeholder(True))


def refit_builtin(semantic: bool) -> None:
    """Refit only the built-in models (the lexical one, and the semantic one if asked)."""
    payload = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    if semantic:
        evidence, rows, _ = set_evidence(_semantic_matcher, training_sets())
        assert evidence.vectors is not None
        payload["semantic"]["builtin"] = fit_builtin(evidence.vectors, rows).to_json()
    rows = [row for item in training_sets() for row in item.rows]
    texts = [row.message[:MAX_MATCH_CHARS] for row in rows]
    words = fit_builtin_words(texts, rows)
    payload["lexical"]["builtin"] = words.to_json()
    # The word model reads the same messages in both configurations: one fit, read by both.
    payload["semantic"]["builtin"]["words"] = words.to_json()["words"]
    WEIGHTS_FILE.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(f"wrote the built-in model(s) into {WEIGHTS_FILE} ({len(rows)} messages)")


def main() -> None:
    """Fit both configurations on every training message and write ``routing.json``."""
    parser = argparse.ArgumentParser(description=__doc__)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--builtin-only", action="store_true", help="refit the built-in models alone")
    only.add_argument(
        "--lexical-only",
        action="store_true",
        help="refit the lexical configuration with its own form model, keep the semantic one",
    )
    only.add_argument(
        "--lexical-builtin-only",
        action="store_true",
        help="refit the built-in word model alone (both configurations); needs no encoder",
    )
    only.add_argument(
        "--semantic-only",
        action="store_true",
        help="refit the semantic configuration, keep the lexical one and its form model",
    )
    args = parser.parse_args()
    if args.builtin_only or args.lexical_builtin_only:
        refit_builtin(semantic=args.builtin_only)
        return
    payload: dict[str, object] = {}
    configurations: list[tuple[str, Callable[[TrainingSet], WorkflowMatcher]]] = [
        ("lexical", lambda _: WorkflowMatcher(model=placeholder(False))),
        ("semantic", _semantic_matcher),
    ]
    kept = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    if args.semantic_only:
        payload["lexical"] = {"form": kept["form"], **kept["lexical"]}
        configurations = configurations[1:]
    if args.lexical_only:
        payload["form"], payload["semantic"] = kept["form"], kept["semantic"]
        configurations = configurations[:1]
    for name, make in configurations:
        evidence, rows, _ = set_evidence(make, training_sets())
        routing = fit_routing(evidence, rows, range(len(rows)))
        payload[name] = routing.to_json()
        assert routing.form is not None
        if args.lexical_only:
            # The semantic configuration keeps the shared form model it was fitted with.
            payload[name] = {"form": routing.form.to_json(), **routing.to_json()}
        else:
            # The same messages in both configurations: one form model, stored once.
            payload["form"] = routing.form.to_json()
    WEIGHTS_FILE.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    sizes = ", ".join(f"{t.name} {len(t.rows)}" for t in training_sets())
    print(f"wrote {WEIGHTS_FILE} from the training sets ({sizes} messages)")


if __name__ == "__main__":
    main()
