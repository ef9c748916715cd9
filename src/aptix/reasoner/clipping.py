"""Cutting text to a number of tokens: summaries, turns sent to be summarized, tool results.

A tool result that would push the current turn over the context budget is clipped only in
the request: the turn's record keeps it whole. The marker tells the model that the tool ran
and how much of its result it is not seeing.
"""

from __future__ import annotations

from collections.abc import Sequence

from aptix.reasoner.tokens import TokenCounter

__all__ = ["clip", "clip_result", "result_marker_tokens", "water_level"]

_ELLIPSIS = " [...]"
_RESULT_MARKER = (
    "\n[Clipped to fit the context budget: the tool ran, and the last {left} of the {total} "
    "characters of its result were left out of this request.]"
)


def clip(counter: TokenCounter, text: str, tokens: int) -> str:
    """``text`` cut to at most ``tokens`` tokens (marked with an ellipsis when cut)."""
    if counter.count(text) <= tokens:
        return text
    return _head(counter, text, tokens - counter.count(_ELLIPSIS)) + _ELLIPSIS


def clip_result(counter: TokenCounter, text: str, tokens: int) -> str:
    """A tool result cut to at most ``tokens`` tokens, its head kept and the cut explained."""
    if counter.count(text) <= tokens:
        return text
    total = len(text)
    # The marker's numbers are not known before the cut: make room for the longest they can be.
    widest = counter.count(_RESULT_MARKER.format(left=total, total=total))
    head = _head(counter, text, tokens - widest)
    return head + _RESULT_MARKER.format(left=total - len(head), total=total)


def result_marker_tokens(counter: TokenCounter, text: str) -> int:
    """The tokens the clipping marker of ``text`` costs at most."""
    return counter.count(_RESULT_MARKER.format(left=len(text), total=len(text)))


def water_level(costs: Sequence[int], room: int) -> int:
    """The largest cap that, applied to every cost, makes them sum to at most ``room``.

    Small results stay whole and the large ones share what is left equally, so one huge
    result does not crowd out the others.
    """
    ordered = sorted(costs)
    for index, cost in enumerate(ordered):
        share = room // (len(ordered) - index)
        if cost > share:
            return share
        room -= cost
    return ordered[-1] if ordered else room


def _head(counter: TokenCounter, text: str, room: int) -> str:
    """The longest start of ``text`` found within ``room`` tokens (shrinking 10% a step)."""
    if room <= 0:
        return ""
    count = counter.count(text)
    cut = len(text) * room // max(count, 1)
    while cut > 0 and counter.count(text[:cut]) > room:
        cut = cut * 9 // 10
    return text[:cut]
