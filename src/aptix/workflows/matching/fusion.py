"""The small logistic model the ranker and the gate are made of.

:class:`FusionModel` is an L2-regularised logistic regression over standardised features,
fitted with Newton's method: deterministic, a few dozen weights, stored as JSON.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["REQUEST_FEATURES", "REQUEST_L2", "FusionModel"]

Matrix = NDArray[np.float64]

#: The request model reads the whole message embedding as its one (vector) feature.
REQUEST_FEATURES = ("embedding",)
#: L2 penalty of the request model: 384 weights need strong shrinkage. Chosen by the
#: leave-one-catalog-out AUC on the training catalogs (30: 0.796-0.894, 100: 0.827-0.904),
#: never on a held-out set.
REQUEST_L2 = 100.0


@dataclass(frozen=True, slots=True)
class FusionModel:
    """Logistic regression over standardised features: ``sigmoid(w . z + b)``."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    #: ``mean``, ``scale`` and ``weights`` as arrays, made once: every match reads them.
    _arrays: tuple[Matrix, Matrix, Matrix] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        arrays = (np.asarray(self.mean), np.asarray(self.scale), np.asarray(self.weights))
        object.__setattr__(self, "_arrays", arrays)

    def probability(self, x: Matrix) -> NDArray[np.float64]:
        """P(candidate is the intended workflow) for each row of ``x``."""
        if x.shape[0] == 0:
            return np.zeros(0)
        mean, scale, weights = self._arrays
        z = (x - mean) / scale
        # Not ``z @ weights``, a NumPy row sum or ``np.exp``: each takes an order or a method
        # that depends on the CPU's vector instructions (and BLAS on where a row falls in its
        # block), so the same evidence could differ in the last bit between machines, and
        # equal rows swap places. ``math.fsum`` is exact, then rounded once: the same float
        # everywhere, as is ``math.exp`` on a given C library.
        logits = [math.fsum(row) + self.bias for row in (z * weights).tolist()]
        out: NDArray[np.float64] = np.asarray(
            [1.0 / (1.0 + math.exp(-min(30.0, max(-30.0, v)))) for v in logits]
        )
        return out

    @classmethod
    def fit(
        cls,
        features: Sequence[str],
        x: Matrix,
        y: NDArray[np.float64],
        l2: float = 1.0,
        nonnegative: Collection[str] = (),
    ) -> FusionModel:
        """Maximum a-posteriori logistic regression (Newton's method, L2 on the weights).

        The weights of the features named in ``nonnegative`` are kept at or above zero.
        """
        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        scale[scale < 1e-9] = 1.0
        z = np.hstack([(x - mean) / scale, np.ones((x.shape[0], 1))])
        penalty = np.full(z.shape[1], l2)
        penalty[-1] = 0.0  # the intercept is not shrunk
        bounded = np.asarray([*(f in nonnegative for f in features), False])
        fitted = _newton(z, y, penalty) if not bounded.any() else _bounded(z, y, penalty, bounded)
        return cls(
            tuple(features),
            tuple(float(b) for b in fitted[:-1]),
            float(fitted[-1]),
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


def _sigmoid(logits: NDArray[np.float64]) -> NDArray[np.float64]:
    out: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(logits, -30.0, 30.0)))
    return out


def _newton(z: Matrix, y: NDArray[np.float64], penalty: NDArray[np.float64]) -> Matrix:
    """Unconstrained Newton's method from zero weights."""
    beta = np.zeros(z.shape[1])
    for _ in range(50):
        p = _sigmoid(z @ beta)
        gradient = z.T @ (p - y) + penalty * beta
        hessian = (z * (p * (1.0 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return beta


def _bounded(
    z: Matrix, y: NDArray[np.float64], penalty: NDArray[np.float64], bounded: NDArray[np.bool_]
) -> Matrix:
    """Projected Newton's method with the ``bounded`` weights kept at or above zero.

    Each step is Newton's on the weights that are free to move (not held at zero by a
    gradient pointing below it), projected back onto the bounds and halved until the loss
    falls: the loss is convex, so this reaches the constrained optimum.
    """

    def loss(beta: Matrix) -> float:
        logits = z @ beta
        # log(1 + e^l) - y l, computed without overflow.
        nll = np.logaddexp(0.0, logits) - y * logits
        return float(nll.sum() + 0.5 * (penalty * beta * beta).sum())

    beta = np.zeros(z.shape[1])
    current = loss(beta)
    for _ in range(200):
        p = _sigmoid(z @ beta)
        gradient = z.T @ (p - y) + penalty * beta
        held = bounded & (beta <= 0.0) & (gradient > 0.0)
        free = ~held
        hessian = (z[:, free] * (p * (1.0 - p))[:, None]).T @ z[:, free]
        hessian += np.diag(penalty[free])
        direction = np.zeros_like(beta)
        direction[free] = -np.linalg.solve(hessian, gradient[free])
        size = 1.0
        while True:
            candidate = beta + size * direction
            candidate[bounded] = np.maximum(candidate[bounded], 0.0)
            value = loss(candidate)
            if value <= current + 1e-4 * float(gradient @ (candidate - beta)) or size < 1e-10:
                break
            size /= 2.0
        moved = float(np.abs(candidate - beta).max())
        beta, current = candidate, value
        if moved < 1e-8:
            break
    return beta
