"""``APTIX_TOOL_MODULES`` module for the hang-up tests: a call that holds until it is cancelled.

``hold`` appends its number to ``$CANCEL_DIR/held`` as it starts, then waits a minute.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aptix


@aptix.tool(usage="Call this to hold a while.")
async def hold(number: int) -> str:
    """Holds a minute (the test's client hangs up first).

    Args:
        number: Which call this is, noted as it starts.
    """
    with (Path(os.environ["CANCEL_DIR"]) / "held").open("a") as held:
        held.write(f"{number}\n")
    await asyncio.sleep(60)
    return "late"
