"""The agent loop: model calls, tool execution, client hand-off and resume."""

from aptix.reasoner.loop import AgentReasoner
from aptix.reasoner.result import ToolResultInput, TurnEvent, TurnResult
from aptix.reasoner.turns import InMemoryTurnStore, TurnRecord, TurnStore

__all__ = [
    "AgentReasoner",
    "InMemoryTurnStore",
    "ToolResultInput",
    "TurnEvent",
    "TurnRecord",
    "TurnResult",
    "TurnStore",
]
