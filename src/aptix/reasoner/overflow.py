"""What takes the room when a turn, or a mode, does not fit the context budget (§10).

The message names the largest part of the request: the tool calls (arguments and results),
the tool schemas, the system message (the mode's instructions first among it) or the
instruction, with the advice that frees that part.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aptix.llm.types import Message

if TYPE_CHECKING:
    from aptix.reasoner.context import ContextBudget

__all__ = ["call_names", "crowded_mode_warning", "overflow_message"]


def overflow_message(
    budget: ContextBudget,
    fixed: int,
    system: Message,
    tools: Sequence[dict[str, Any]],
    current: Sequence[Message] = (),
    instructions: str = "",
) -> str:
    """Why the current turn does not fit, naming what takes the room.

    ``instructions`` are the mode's, inside ``system``: named when they fill it.
    """
    head = (
        f"The current turn needs about {fixed} tokens with the system message and tool "
        f"schemas, more than the context budget of {budget.limit} tokens "
        "(APTIX_LLM_CONTEXT_TOKENS)."
    )
    return f"{head} {_taking_room(budget, fixed, system, tools, current, instructions)}"


def crowded_mode_warning(
    budget: ContextBudget,
    key: str,
    system: Message,
    tools: Sequence[dict[str, Any]],
    instructions: str,
) -> str | None:
    """A warning when mode ``key``'s own system message and tool schemas leave no room."""
    fixed = budget.request_tokens([system, {"role": "user", "content": ""}], tools)
    if fixed < budget.limit:
        return None
    return (
        f"Mode '{key}' leaves no room for a turn: its system message and tool schemas need "
        f"about {fixed} tokens before any boot message or instruction, more than the context "
        f"budget of {budget.limit} tokens (APTIX_LLM_CONTEXT_TOKENS), so every turn in it ends "
        f"with context_overflow. {_taking_room(budget, fixed, system, tools, (), instructions)}"
    )


def _taking_room(
    budget: ContextBudget,
    fixed: int,
    system: Message,
    tools: Sequence[dict[str, Any]],
    current: Sequence[Message],
    instructions: str,
) -> str:
    """The largest part of a request of ``fixed`` tokens, and what would free it."""
    schemas = budget.tools_tokens(tools)
    calls = _call_costs(budget, current)
    taken = sum(calls.values())
    own = budget.message_tokens(system)
    rest = fixed - own - schemas - taken
    largest = max(taken, schemas, own, rest)
    if taken == largest:
        by_size = sorted(calls.items(), key=lambda item: item[1], reverse=True)
        names = ", ".join(f"'{name}' (about {cost})" for name, cost in by_size[:3])
        return (
            f"Its tool calls (their arguments and results) take about {taken} tokens and do "
            f"not fit even with the results clipped; by tool: {names}. Ask for fewer or "
            "smaller calls at a time, or raise the budget."
        )
    if schemas == largest:
        costs = sorted(
            (
                (budget.counter.count(json.dumps(t, ensure_ascii=False)), str(t.get("name")))
                for t in tools
            ),
            reverse=True,
        )
        names = ", ".join(f"'{name}' (about {cost})" for cost, name in costs[:3])
        return (
            f"The tool schemas take about {schemas} tokens; the largest: {names}. "
            "Offer fewer tools in this mode, or raise the budget."
        )
    if own == largest:
        mine = budget.counter.count(instructions.strip())
        if mine * 2 >= own:
            return (
                f"The mode's instructions take about {mine} of the system message's {own} "
                "tokens. Shorten the mode's instructions (the mode catalog, "
                "APTIX_MODES_PATH), or raise the budget."
            )
        return (
            f"The system message takes about {own} tokens (the mode's instructions about "
            f"{mine}; the rest is tool guidance and the workflows on offer). Offer fewer "
            "tools or workflows in this mode, or raise the budget."
        )
    return "Shorten the instruction or raise the budget."


def call_names(messages: Sequence[Message]) -> dict[str, str]:
    """The tool each call id of ``messages`` names."""
    return {
        str(c.get("id")): str(c["function"]["name"])
        for m in messages
        for c in m.get("tool_calls") or ()
    }


def _call_costs(budget: ContextBudget, messages: Sequence[Message]) -> dict[str, int]:
    """The tokens the tool calls of ``messages`` take, arguments and results, per tool name."""
    names = call_names(messages)
    costs: dict[str, int] = {}
    for message in messages:
        # Arguments cannot be clipped as results are, so a call's own arguments can fill the
        # room: count them with its result, not against the instruction.
        for call in message.get("tool_calls") or ():
            name = str(call["function"]["name"])
            args = json.dumps(call, ensure_ascii=False)
            costs[name] = costs.get(name, 0) + budget.counter.count(args)
        if message.get("role") == "tool":
            name = names.get(str(message.get("tool_call_id")), "?")
            costs[name] = costs.get(name, 0) + budget.message_tokens(message)
    return costs
