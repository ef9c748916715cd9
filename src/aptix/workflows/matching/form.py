"""A message's form: what it does, read from its function words alone.

"pls open a ticket for the printer" and "pls book a room for the offsite" share no content
word and the same form; "pls open a ticket" and "last year someone opened a ticket" share
their content and differ in form. Every word outside a closed list of English function words
(pronouns, modals, auxiliaries, determiners, prepositions, time words, politeness) becomes a
placeholder (``X``, or ``Xed`` for a word ending in "ed", a cheap past-tense mark), and the
message is read as the 1-3-grams of what is left.

:class:`FormModel` weighs each n-gram by its naive-Bayes log-count ratio between the training
messages that ask for a workflow and those that do not: closed form, so refitting in every
fold costs nothing. The gate reads one number from it (``form``); like the speech-act cues of
:mod:`.cues`, it knows nothing about any catalog.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FUNCTION_WORDS", "FormModel", "form_grams"]

_FUNCTION_TEXT = """
i me my mine we us our you your u yourself he she it they them their his her its this that
these those there here a an the some any no not never all every each one am is are was were
be been being do does did done doing have has had having will would shall should can could may
might must don't doesn't didn't won't wouldn't can't cannot couldn't shouldn't isn't aren't
wasn't weren't haven't hasn't i'm i'd i've i'll we're we'd we've we'll you're it's that's
there's let's to of in on at for with from by about into over after before since until as than
if then so because but and or when while where who whom whose what which why how please pls
plz thanks thank hi hey hello ok okay yes yeah sure just also still already yet again ever
once maybe perhaps probably really very too quite need needs want wants like love hate think
know wish hope tell help get make let give go going gonna wanna yesterday today tomorrow
tonight last next ago now soon later someday always usually sometimes often sister brother
cousin mum mom dad friend colleague niece nephew wife husband
"""
#: Words kept as themselves; every other word is a placeholder.
FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())

_TOKEN = re.compile(r"[a-z']+|[?!]")
#: Laplace smoothing of the per-class n-gram counts.
ALPHA = 1.0
#: N-grams seen in fewer training messages than this get no weight.
MIN_COUNT = 3


def form_grams(text: str) -> frozenset[str]:
    """The 1-3-grams of the message's form (function words kept, the rest placeholders)."""
    tokens = _TOKEN.findall(text.casefold().replace("\u2019", "'"))
    form = ["<s>"]
    for token in tokens:
        if token in FUNCTION_WORDS or token in ("?", "!"):
            form.append(token)
        else:
            form.append("Xed" if token.endswith("ed") else "X")
    form.append("</s>")
    grams = set(form)
    grams.update(f"{a} {b}" for a, b in itertools.pairwise(form))
    grams.update(f"{a} {b} {c}" for a, b, c in zip(form, form[1:], form[2:], strict=False))
    return frozenset(grams)


@dataclass(frozen=True, slots=True)
class FormModel:
    """Naive-Bayes log-count ratios of form n-grams: positive leans towards a request."""

    weights: Mapping[str, float]

    def score(self, text: str) -> float:
        """The summed weights of the message's known n-grams over the root of its n-grams."""
        grams = form_grams(text)
        # fsum is exact, so the result does not depend on the set's (hash-seeded) order.
        return math.fsum(self.weights.get(g, 0.0) for g in grams) / math.sqrt(len(grams))

    @classmethod
    def fit(cls, messages: Sequence[str], asks: Sequence[bool]) -> FormModel:
        """Log-count ratios over ``messages``, each labelled by whether it asks for a workflow."""
        counts: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
        for message, ask in zip(messages, asks, strict=True):
            counts[ask].update(form_grams(message))
        sizes = (sum(not a for a in asks), sum(bool(a) for a in asks))
        weights = {}
        for gram in sorted(set(counts[0]) | set(counts[1])):
            if counts[0][gram] + counts[1][gram] < MIN_COUNT:
                continue
            yes = (counts[1][gram] + ALPHA) / (sizes[1] + 2 * ALPHA)
            no = (counts[0][gram] + ALPHA) / (sizes[0] + 2 * ALPHA)
            weights[gram] = math.log(yes) - math.log(no)
        return cls(weights)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, n-grams in sorted order (the file is byte-stable)."""
        return {"weights": {g: round(w, 6) for g, w in sorted(self.weights.items())}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FormModel:
        """The model stored by :meth:`to_json`."""
        return cls({str(g): float(w) for g, w in data["weights"].items()})
