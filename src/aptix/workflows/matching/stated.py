"""A message that states one of a workflow's intent patterns outright asks for that workflow.

An author writes intent patterns as the words a user would say. When the message is such a
pattern, give or take a few words of politeness ("please switch to another mode", "can you
introduce yourself"), and is not negated, it is as plain a request as a message gets, and
the gate's statistics have nothing to add: the workflow is accepted and ranked first. This
is the step between explicit initiation ("use workflow: choose_mode") and inference.
"""

from __future__ import annotations

from collections.abc import Iterable

from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.matching.cues import CUES, message_cues
from aptix.workflows.matching.text import normalise

__all__ = ["EXTRA_WORDS", "StatedPatterns"]

#: Words a message may have beyond the pattern it states ("please", "can you", "for me").
EXTRA_WORDS = 3
#: A one-word pattern ("hello") is too thin to count as stated.
MIN_PATTERN_WORDS = 2


class StatedPatterns:
    """Normalised intent patterns of the indexed workflows, for exact look-up."""

    def __init__(self) -> None:
        self._owner: dict[str, str | None] = {}
        self._longest = 0

    def build(self, manifests: Iterable[WorkflowManifest]) -> None:
        """Index every pattern; one two workflows share belongs to neither."""
        owner: dict[str, str | None] = {}
        for manifest in manifests:
            for pattern in manifest.user_intent_patterns:
                key = normalise(pattern)
                if len(key.split()) < MIN_PATTERN_WORDS:
                    continue
                known = owner.get(key, manifest.workflow_id)
                owner[key] = manifest.workflow_id if known == manifest.workflow_id else None
        self._owner = owner
        self._longest = max((len(k.split()) for k in owner), default=0)

    def find(self, message: str, negated: bool | None = None) -> str | None:
        """The workflow whose pattern ``message`` states, if exactly one does.

        ``negated`` is the message's negation cue when the caller has it already.
        """
        words = normalise(message).split()
        if not self._owner or len(words) > self._longest + EXTRA_WORDS:
            return None
        if negated is None:
            negated = bool(message_cues(message)[CUES.index("negated")])
        if negated:
            return None
        found: set[str | None] = set()
        shortest = max(MIN_PATTERN_WORDS, len(words) - EXTRA_WORDS)
        for size in range(len(words), shortest - 1, -1):
            for start in range(len(words) - size + 1):
                key = " ".join(words[start : start + size])
                if key in self._owner:
                    found.add(self._owner[key])
            if found:
                break
        return found.pop() if len(found) == 1 else None
