"""A sparse logistic model over a message's words: the lexical path's built-in model.

The built-in workflows (greeting, modes, calculation, authoring and publishing) are the same
in every deployment, so whether a message asks for one of them is a closed-set question.
With the semantic extra the message embedding answers it; without it, this model does, from
three kinds of binary evidence (:func:`word_features`): the message's content terms as the
lexical matcher reads them (stemmed, synonyms folded), its normalised words (function words
included: "hi", "how much") and its word bigrams ("work out", "switch to").

Fitted by ``python -m bench.fit_routing`` (scikit-learn's L2 logistic regression) on the
training catalogs' messages, each labelled by whether it asks for a built-in; only the
weights ship, and a probability is one sum over the message's features.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aptix.workflows.matching.text import STOPWORDS, normalise, term_of

__all__ = ["WordModel", "word_features"]


def word_features(text: str) -> frozenset[str]:
    """The message's content terms (``t:``), normalised words (``w:``) and bigrams (``b:``)."""
    words = normalise(text).split()
    # The content terms as text.terms() reads them, without normalising the text twice.
    out = {f"t:{term_of(w)}" for w in words if w not in STOPWORDS} | {f"w:{w}" for w in words}
    out.update(f"b:{a}_{b}" for a, b in itertools.pairwise(words))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class WordModel:
    """Weights of :func:`word_features` and a bias: P = sigmoid(bias + the present weights)."""

    weights: Mapping[str, float]
    bias: float

    def probability(self, text: str) -> float:
        """P(the message is of the positive class)."""
        return self.probability_of(word_features(text))

    def probability_of(self, features: frozenset[str]) -> float:
        """P(the message is of the positive class), from its :func:`word_features`."""
        # fsum is exact, so the result does not depend on the set's (hash-seeded) order.
        z = self.bias + math.fsum(self.weights.get(f, 0.0) for f in features)
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, features in sorted order (the file is byte-stable)."""
        return {
            "bias": round(self.bias, 6),
            "weights": {f: round(w, 6) for f, w in sorted(self.weights.items())},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WordModel:
        """The model stored by :meth:`to_json`."""
        return cls({str(f): float(w) for f, w in data["weights"].items()}, float(data["bias"]))
