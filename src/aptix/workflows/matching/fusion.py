"""Fusing the matchers' evidence into one calibrated ``matchScore``: a small logistic model.

For every candidate workflow of a message (the union of the lexical and the semantic
matcher's best candidates) the features below are computed; a logistic regression turns them
into the probability that the candidate is the workflow the user means. That probability is
``matchScore``, so 0.45 means the same whichever matcher supplied the evidence, and a strong
signal from either matcher can carry a match on its own: neither can veto the other.

With the semantic matcher, two more kinds of evidence join: how well a workflow's texts agree
(the mean of its two closest texts, its centroid) and :func:`request_model`, the probability
that the message asks for a task at all, read from the message embedding.

The weights are fitted by ``python -m bench.workflows --fit`` on the labelled set in
``tests/workflows/matchset`` and stored in ``fusion.json``; the bench reports accuracy only on
folds the weights (the request model's included) were not fitted on.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "FUSED_FEATURES",
    "LEXICAL_FEATURES",
    "REQUEST_FEATURES",
    "FusionModel",
    "default_model",
    "message_cues",
    "request_model",
]

Matrix = NDArray[np.float64]

#: Features of the lexical-only configuration.
LEXICAL_FEATURES = ("lex", "lex_margin", "lex_top", "negated", "info_question", "short")
#: Features when the semantic matcher is on as well.
FUSED_FEATURES = (
    *LEXICAL_FEATURES,
    "sem",
    "sem_margin",
    "sem_top",
    "sem_top2",
    "sem_centroid",
    "request",
)
#: The request model reads the whole message embedding as its one (vector) feature.
REQUEST_FEATURES = ("embedding",)
#: L2 penalty of the request model: 384 weights from a few hundred messages need strong shrinkage.
REQUEST_L2 = 30.0

WEIGHTS_FILE = Path(__file__).parent / "fusion.json"

# Generic English cues that a message mentions a task without asking for it ("don't create a
# DDR, just explain what one is", "who fixed the login bug?"). The model learns their weight.
_NEGATED = re.compile(
    r"\b(?:don'?t|do not|no need (?:to|for)|not (?:asking|want(?:ing)?)|never mind|"
    r"without (?:creating|writing|starting)|instead of (?:creating|writing))\b"
)
_INFO_QUESTION = re.compile(
    r"^(?:(?:so|and|but|hey|ok|okay),?\s+)?(?:who|when|where|why did|how many|how long|"
    r"what(?:'s| is| are| does| was) (?:a|an|the (?:difference|meaning|name|history))\b|"
    r"what does|define|is (?:a|an)\b)"
    r"|\b(?:stand for|meaning of|difference between|in one sentence)\b"
)


def message_cues(text: str, content_terms: int) -> tuple[float, float, float]:
    """``(negated, info_question, short)`` for a normalised-case message."""
    lowered = text.casefold().strip()
    negated = 1.0 if _NEGATED.search(lowered) else 0.0
    info = 1.0 if _INFO_QUESTION.search(lowered) else 0.0
    short = 1.0 if content_terms <= 1 else 0.0
    return negated, info, short


@dataclass(frozen=True, slots=True)
class FusionModel:
    """Logistic regression over standardised features: ``sigmoid(w . z + b)``."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]

    def probability(self, x: Matrix) -> NDArray[np.float64]:
        """P(candidate is the intended workflow) for each row of ``x``."""
        if x.shape[0] == 0:
            return np.zeros(0)
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        logits = z @ np.asarray(self.weights) + self.bias
        out: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(logits, -30.0, 30.0)))
        return out

    @classmethod
    def fit(
        cls, features: Sequence[str], x: Matrix, y: NDArray[np.float64], l2: float = 1.0
    ) -> FusionModel:
        """Maximum a-posteriori logistic regression (Newton's method, L2 on the weights)."""
        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        scale[scale < 1e-9] = 1.0
        z = np.hstack([(x - mean) / scale, np.ones((x.shape[0], 1))])
        beta = np.zeros(z.shape[1])
        penalty = np.full(z.shape[1], l2)
        penalty[-1] = 0.0  # the intercept is not shrunk
        for _ in range(50):
            p = 1.0 / (1.0 + np.exp(-np.clip(z @ beta, -30.0, 30.0)))
            gradient = z.T @ (p - y) + penalty * beta
            hessian = (z * (p * (1.0 - p))[:, None]).T @ z + np.diag(penalty)
            step = np.linalg.solve(hessian, gradient)
            beta -= step
            if float(np.abs(step).max()) < 1e-8:
                break
        return cls(
            tuple(features),
            tuple(float(b) for b in beta[:-1]),
            float(beta[-1]),
            tuple(float(m) for m in mean),
            tuple(float(s) for s in scale),
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (as stored in ``fusion.json``)."""
        return {
            "features": list(self.features),
            "weights": list(self.weights),
            "bias": self.bias,
            "mean": list(self.mean),
            "scale": list(self.scale),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FusionModel:
        """The model stored by :meth:`to_json`."""
        return cls(
            tuple(data["features"]),
            tuple(float(w) for w in data["weights"]),
            float(data["bias"]),
            tuple(float(m) for m in data["mean"]),
            tuple(float(s) for s in data["scale"]),
        )


@functools.cache
def default_model(semantic: bool) -> FusionModel:
    """The shipped model for the lexical-only or the fused configuration."""
    data = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    model = FusionModel.from_json(data["fused" if semantic else "lexical"])
    expected = FUSED_FEATURES if semantic else LEXICAL_FEATURES
    if model.features != expected:
        raise ValueError(f"{WEIGHTS_FILE.name} was fitted on other features: refit it.")
    return model


@functools.cache
def request_model() -> FusionModel:
    """P(the message asks for a task at all), from its embedding alone.

    It tells "write the release notes" from "what are release notes?", which name the same
    nouns; the fusion model takes it as the ``request`` feature.
    """
    data = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    model = FusionModel.from_json(data["request"])
    if model.features != REQUEST_FEATURES:
        raise ValueError(f"{WEIGHTS_FILE.name} has no request model: refit it.")
    return model
