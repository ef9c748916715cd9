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
    """The longest start of ``text`` found within ``room`` tokens, counted, not averaged.

    The first guess is the average density; a search on the cut then follows the text's real
    counts, so a start lighter than the average (ASCII before CJK, prose before code) keeps
    what fits instead of being cut far short of ``room``.
    """
    if room <= 0:
        return ""
    count = counter.count(text)
    if count <= room:
        return text
    fits, spills = 0, len(text)  # text[:fits] is within room, text[:spills] is not
    probe = max(1, len(text) * room // count)
    while probe < spills and counter.count(text[:probe]) <= room:
        fits, probe = probe, probe * 2
    spills = min(spills, probe)
    # Within 1% of the longest start: each count costs as much as the start it counts.
    while spills - fits > max(1, fits // 100):
        middle = (fits + spills) // 2
        if counter.count(text[:middle]) <= room:
            fits = middle
        else:
            spills = middle
    return text[:fits]
