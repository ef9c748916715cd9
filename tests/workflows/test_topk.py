"""The k largest entries, ties to the lower index, and the same routing on every CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

from aptix.workflows.matching.topk import largest

# Few distinct values, so that most draws tie across the cut.
VALUES = st.lists(
    st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 0.1 + 0.2, -1.0, float("nan")]), max_size=300
)


@given(VALUES, st.integers(min_value=0, max_value=320))
def test_the_kept_entries_are_those_a_stable_sort_puts_first(values: list[float], k: int) -> None:
    array = np.asarray(values)
    expected = sorted(np.argsort(-array, kind="stable")[:k].tolist())
    assert largest(array, k).tolist() == expected


def test_float32_scores_are_selected_like_float64_ones() -> None:
    scores = np.random.default_rng(3).choice([0.2, 0.4, 0.9], 5_000).astype(np.float32)
    kept = largest(scores, 40)
    assert kept.tolist() == sorted(np.argsort(-scores, kind="stable")[:40].tolist())
    assert scores[kept].tolist() == [np.float32(0.9)] * 40


# Each message's candidates, every feature and the decision to the bit, on near-duplicates.
_ROUTING = """
import json
from aptix.workflows.matching.combined import WorkflowMatcher
from tests.workflows.evalset import synthetic_catalog, synthetic_messages
catalog = synthetic_catalog(2_000)
matcher = WorkflowMatcher()
matcher.rebuild(catalog)
out = []
for message in synthetic_messages(catalog, 150):
    found = matcher.candidates(message)
    decision = matcher.decision(found)
    out.append([found.ids, found.features.tobytes().hex(), found.message.tobytes().hex(),
                [[w, p.hex()] for w, p in decision.ranked], decision.gate.hex()])
print(json.dumps(out))
"""


def _routing(disabled: list[str], blas: str | None = None) -> object:
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(disabled))
    if blas is not None:
        env["OPENBLAS_CORETYPE"] = blas
    done = subprocess.run(
        [sys.executable, "-c", _ROUTING], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_lexical_routing_does_not_depend_on_the_cpus_vector_instructions() -> None:
    # NumPy dispatches partitioning, sums and exp to AVX-512 or AVX2 code where the CPU has
    # it, and OpenBLAS its kernels; each picks among ties, or rounds, in its own way. Turned
    # off, matching must keep the same candidates, features and decisions, to the bit.
    wide = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    assert wide, "no dispatched vector instructions on this CPU: nothing to compare"
    without_512 = [f for f in wide if "512" in f or f.endswith("V4") or f.endswith("SPR")]
    runs = [_routing([]), _routing(wide, blas="Prescott")]
    if without_512 and len(without_512) < len(wide):
        runs.append(_routing(without_512))
    assert all(run == runs[0] for run in runs[1:])
