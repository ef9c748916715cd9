"""``APTIX_TOOL_MODULES`` module for the live cancel test: a quick call and a slow one.

``pay`` appends a line to ``$CANCEL_DIR/paid`` per run; ``slow`` creates
``$CANCEL_DIR/slow-started`` and then waits a minute, long enough to be cancelled mid-batch.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aptix


@aptix.tool(usage="Call this to pay an invoice.")
async def pay(invoice: int) -> str:
    """Pays an invoice (one line in a file per run).

    Args:
        invoice: The invoice number.
    """
    with (Path(os.environ["CANCEL_DIR"]) / "paid").open("a") as paid:
        paid.write(f"{invoice}\n")
    return f"paid {invoice}"


@aptix.tool(usage="Call this to wait a while.")
async def slow() -> str:
    """Waits a minute (the test cancels the turn first)."""
    (Path(os.environ["CANCEL_DIR"]) / "slow-started").touch()
    await asyncio.sleep(60)
    return "late"
