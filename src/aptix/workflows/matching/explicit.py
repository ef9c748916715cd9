"""Explicit initiation (TUL-006 §3.3): "use workflow: <id>", "start the <id> workflow"."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["explicit_workflow_id", "id_key", "keyed", "named_in", "names_unknown"]

_VERBS = r"(?:use|run|start|begin|launch|open|load|initiate|trigger|execute)"
_QUOTES = "`'\"“”‘’"
# What follows "use workflow:" / "workflow:" up to the end of the clause.
# The name is read in a lookahead, so that a second naming in the same clause ("use workflow:
# nosuch or use workflow: offsite") is found too.
_AFTER = (
    re.compile(rf"\b{_VERBS}\s+(?:the\s+|a\s+)?workflow\b\s*[:=]?\s*(?=([^.!?,;\n]+))"),
    re.compile(r"\bworkflow\s*[:=]\s*(?=([^.!?,;\n]+))"),
)
# "use workflow: <id>": a request for one id, whatever else the message says.
_BY_ID = re.compile(rf"\b{_VERBS}\s+(?:the\s+|a\s+)?workflow\s*[:=]\s*(?=([^.!?,;\n]+))")
# Words a person may put before a name: "use workflow: the guided_calculation".
_ARTICLES = frozenset({"the", "a", "an", "my", "our"})
# What stands between "start the" and "workflow".
_BEFORE = re.compile(rf"\b{_VERBS}\s+(?:the\s+|a\s+|my\s+)?([^.!?,;\n]+?)\s+workflow\b")
_MAX_NAME_WORDS = 6
# A naming the clause turns down ("don't use workflow: x", "rather than the x workflow").
_NEGATION = re.compile(
    r"\b(?:don['’]?t|do\s+not|never|not|no\s+need\s+to|without|instead\s+of|rather\s+than)\b"
    r"\W*(?:\w+\W+){0,2}$"
)
_CLAUSE_END = re.compile(r"[.!?,;\n]")


def id_key(text: str) -> str:
    """How ids are compared: case-insensitive, with '-', ' ' and '_' alike."""
    return re.sub(r"[\s_-]+", "_", text.strip(_QUOTES + " ").casefold())


def keyed(workflow_ids: Iterable[str]) -> dict[str, str]:
    """Each id under its :func:`id_key` (of ids sharing a key, the last one)."""
    return {id_key(w): w for w in workflow_ids}


def explicit_workflow_id(message: str, workflow_ids: Iterable[str]) -> str | None:
    """The id the message names explicitly, when it names one of ``workflow_ids``."""
    if "workflow" not in message.casefold():
        return None
    return named_in(message, keyed(workflow_ids))


def named_in(message: str, by_key: Mapping[str, str]) -> str | None:
    """:func:`explicit_workflow_id` against ids already keyed by :func:`keyed`.

    A catalog of 10,000 workflows takes milliseconds to key, so the registry keys it once
    per revision rather than once per message that says "workflow".
    """
    text = message.strip().casefold()
    if "workflow" not in text:
        return None
    for pattern in _AFTER:
        for found in pattern.finditer(text):
            if _negated(text, found.start()):
                continue
            named = _leading_name(found.group(1).split(), by_key)
            if named:
                return named
    for found in _BEFORE.finditer(text):
        if _negated(text, found.start()):
            continue
        words = found.group(1).split()[-_MAX_NAME_WORDS:]
        for start in range(len(words)):  # longest name first
            named = by_key.get(id_key(" ".join(words[start:])))
            if named:
                return named
    return None


def _negated(text: str, start: int) -> bool:
    """True when the clause before ``start`` turns the naming down, within three words."""
    before = _CLAUSE_END.split(text[:start])[-1]
    return _NEGATION.search(before) is not None


def names_unknown(message: str, by_key: Mapping[str, str]) -> bool:
    """True when ``message`` asks for a workflow by id ("use workflow: x") not in ``by_key``.

    Only that form counts: "start the onboarding workflow" may describe a workflow in other
    words, and "my workflow: first I..." describes the user's own; inference reads those.
    """
    text = message.strip().casefold()
    for found in _BY_ID.finditer(text):
        if _negated(text, found.start()):
            continue
        words = found.group(1).split()
        if words and _leading_name(words, by_key) is None:
            return True
    return False


def _leading_name(words: list[str], by_key: Mapping[str, str]) -> str | None:
    """The id the first words name (longest first), with or without a leading article."""
    starts = [words[:_MAX_NAME_WORDS]]
    if len(words) > 1 and words[0] in _ARTICLES:
        starts.append(words[1 : _MAX_NAME_WORDS + 1])
    for name in starts:
        for end in range(len(name), 0, -1):
            named = by_key.get(id_key(" ".join(name[:end])))
            if named:
                return named
    return None
