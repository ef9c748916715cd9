"""Speech-act cues: generic English patterns that tell a request from talk about a task.

Scores say what a message is about; these cues say what it does with it. "Create a DDR" and
"our DDRs are famously long" share every content word, and only the form differs: a request
is a command, a plea or a stated need; a near miss is a negation ("don't create a DDR"), an
information question ("what does DDR stand for?"), a story ("last spring the migration went
smoothly"), an opinion ("surveys are so annoying"), a report that the work is done ("the
invoice was paid yesterday") or small talk. The gate learns how much each cue weighs; none
decides on its own. The cues know nothing about any catalog.
"""

from __future__ import annotations

import re

__all__ = ["CUES", "message_cues"]

_LEAD = r"^(?:(?:so|and|but|hey|hi|ok|okay|um|well|also|btw),?\s+)?"

_NEGATED = re.compile(
    r"\b(?:don'?t|do not|no need (?:to|for)|not (?:asking|want(?:ing)?|now|yet)|never mind|"
    r"without (?:creating|writing|starting)|instead of (?:creating|writing)|decided not to|"
    r"skip (?:the|it)|not needed|(?:i|we) already|(?:is|was|were|are|has been|have been) "
    r"already|no longer need|hold off|not necessary|doesn'?t need)\b"
)
_INFO_QUESTION = re.compile(
    _LEAD + r"(?:who|when|where|why (?:do|does|did|is|are)|how many|how long|how (?:do|does) "
    r"(?:other|most|people|companies|teams|you tell)|"
    r"what(?:'s| is| are| does| was| were) (?:a|an|the (?:difference|meaning|name|history|point|"
    r"usual|typical|best))\b|what (?:does|do)|define|is (?:a|an)\b|are (?:\w+s) (?:worth|good|"
    r"bad|better)|is \w+ better)"
    r"|\b(?:stand for|meaning of|difference between|in one sentence|in general|usually|"
    r"generally|typically)\b"
)
_SMALL_TALK = re.compile(
    r"\b(?:how are you|how'?s it going|what'?s up|are you (?:a|an|there|real|human|listening|"
    r"smart|ok|okay|happy|alive|awake|bored)|do you (?:like|love|have feelings|feel|dream|think|"
    r"know any|ever|sleep|get)|your (?:name|favou?rite)|who (?:made|built|created) you|nice to "
    r"meet|thanks?(?: you)?\b|thank you|cheers\b|good (?:job|night|bye|morning|afternoon|"
    r"evening)|bye\b|see you|haha|lol\b|cool\b|never ?mind|how old are you|where do you live|"
    r"i'?m (?:bored|tired|having|hungry|sleepy)|tell me (?:a joke|something)|weather|weekend)"
)
_QUESTION = re.compile(
    _LEAD + r"(?:who|what|when|where|why|how|which|is|are|was|were|do|does|did|has|have)\b"
)
# A plea, a command addressed to the assistant, or a stated need.
_REQUEST = re.compile(
    r"\b(?:please|pls|plz|can (?:you|u|i get|we get)|could (?:you|u|i get)|would you|will you|"
    r"(?:i|we) (?:need|want|would like|'?d like|have to|must|should)|i'?d like|need (?:a|an|to|"
    r"the|you)|let'?s|help me|help us|for me|asap|go ahead|make sure|get me|set me up|"
    r"i'?m (?:trying|looking) to|(?:can'?t|cannot|unable to) (?:log|get|open|access|find|see)|"
    r"is (?:broken|down|failing|stuck)|(?:keeps|still) (?:failing|crashing|saying)|"
    r"needs? to (?:go|be)|it'?s time to|time to)\b"
    r"|" + _LEAD + r"(?:start|create|make|write|draft|open|book|order|set up|setup|fix|add|"
    r"send|run|get|give|put|prepare|schedule|cancel|approve|reject|review|check|update|change|"
    r"move|plan|file|submit|raise|issue|log|generate|build|new|draft|do)\b"
)
# Something that happened, or a habit: a story, not a task.
_PAST = re.compile(
    r"\b(?:yesterday|last (?:year|month|week|spring|summer|autumn|fall|winter|time|quarter)|"
    r"(?:years?|months?|weeks?|days?) ago|back (?:then|when|in)|used to|once (?:had|was|did)|"
    r"(?:19|20)\d\d|when i was|i remember|remember when|went|was|were|had|did|turned out|"
    r"taught|in my (?:first|last|old|previous))\b"
)
# A judgement or a remark about how things are.
_OPINION = re.compile(
    r"\b(?:(?:is|are|was|were|looks?|seems?|feels?) (?:so|really|quite|very|pretty|too|always|"
    r"never|kind of|a bit|fine|great|nice|amazing|awful|terrible|boring|annoying|fun|funny|"
    r"overrated|underrated|famously|surprisingly)|i (?:love|hate|like|enjoy|prefer)|(?:is|are) "
    r"like|isn'?t it|aren'?t they|honestly|to be fair|in my opinion|imo)\b"
)

#: Cue names in the order :func:`message_cues` returns them.
CUES = ("negated", "info_question", "small_talk", "question", "request", "past", "opinion")
_PATTERNS = (_NEGATED, _INFO_QUESTION, _SMALL_TALK, _QUESTION, _REQUEST, _PAST, _OPINION)


def message_cues(text: str) -> tuple[float, ...]:
    """One 0/1 value per cue in :data:`CUES` order."""
    lowered = " ".join(text.casefold().replace("\u2019", "'").split())
    out = [1.0 if pattern.search(lowered) else 0.0 for pattern in _PATTERNS]
    if lowered.endswith("?"):
        out[CUES.index("question")] = 1.0
    return tuple(out)
