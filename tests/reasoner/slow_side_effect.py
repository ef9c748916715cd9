"""``APTIX_TOOL_MODULES`` module of test_two_serve_processes: a slow call with a side effect.

``slow_write`` appends ``start <mark>`` to the file ``SIDE_LOG`` names, sleeps, then appends
``end <mark>``: the test reads there whether a call ran to its end, and how many times.
"""

from __future__ import annotations

import asyncio
import os

import aptix


def _note(line: str) -> None:
    with open(os.environ["SIDE_LOG"], "a", encoding="utf-8") as side:
        side.write(line + "\n")


@aptix.tool(usage="Call this to write a mark slowly.")
async def slow_write(mark: str, seconds: float) -> str:
    """Writes ``mark``, slowly; not safe to run twice.

    Args:
        mark: What to write.
        seconds: How long the write takes.
    """
    _note(f"start {mark}")
    await asyncio.sleep(seconds)
    _note(f"end {mark}")
    return f"written {mark}"
