"""``APTIX_TOOL_MODULES`` module of the crash matrix: a counted ``@aptix.tool``, and the gates.

``charge`` appends a line per run. Importing the module (which ``aptix serve`` does at
start-up) also wraps ``AgentToolExecutor.execute`` so the test can stop the server just
before a counted call runs (``before_run``) or just after it returned, before the
turn stores its outcome (``after_return``). No code in ``src/`` knows about it.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import aptix
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
from aptix.tools.executor import AgentToolExecutor

sys.path.insert(0, str(Path(__file__).parent))
from crash_gate import gate, record_run

#: The counted tools: this module's, and the MCP server's under its prefix.
COUNTED = frozenset({"charge", "vault_wipe"})


@aptix.tool(usage="Call this to charge an invoice.")
async def charge(invoice: int) -> str:
    """Charges an invoice (a side effect: one line in a file per run).

    Args:
        invoice: The invoice number.
    """
    record_run(str(invoice))
    await gate("tool_runs", str(invoice))
    return f"charged invoice {invoice}"


def _runs_for_real(call: AgentToolCall, kwargs: dict[str, Any]) -> bool:
    # An MCP call under approval only prepares the approval request until it is approved.
    return call.name == "charge" or (call.name in COUNTED and kwargs.get("approved") is True)


_execute = AgentToolExecutor.execute


@functools.wraps(_execute)
async def _gated_execute(
    self: AgentToolExecutor,
    call: AgentToolCall,
    context: AgentToolExecutionContext,
    **kwargs: Any,
) -> AgentToolCall:
    counted = _runs_for_real(call, kwargs)
    # Only the counted calls are read: any other call (deep or broken JSON included) goes
    # through untouched, as it would without this patch, should this module get imported
    # into a test process.
    key = ""
    if counted:
        arguments = json.loads(call.arguments_json)
        key = str(arguments.get("invoice", arguments.get("target")))  # its crash_gate key
        await gate("before_run", key)
    done = await _execute(self, call, context, **kwargs)
    if counted:
        await gate("after_return", key)
    return done


AgentToolExecutor.execute = _gated_execute  # type: ignore[method-assign]
