"""The crash matrix's gate: a process marks that it reached a point, then waits to be killed.

Shared by the tool module and the MCP server of ``test_crash_matrix.py``. ``CRASH_DIR`` is
the directory the test watches; its file ``crash-at`` names the point to stop at (no file:
never stop), so one process after another can be sent to a different point.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


def record_run(tool: str) -> None:
    """Append one line per run: the side effect the test counts (durable before returning)."""
    with open(Path(os.environ["CRASH_DIR"]) / f"runs-{tool}", "a", encoding="utf-8") as f:
        f.write("run\n")
        f.flush()
        os.fsync(f.fileno())


async def gate(point: str) -> None:
    """At ``point`` (if ``crash-at`` names it): say so with a file, then wait for the kill."""
    crash_dir = Path(os.environ["CRASH_DIR"])
    wanted = crash_dir / "crash-at"
    if not wanted.exists() or wanted.read_text() != point:
        return
    (crash_dir / f"reached-{point}").write_text(str(os.getpid()))
    parent = os.getppid()
    # The test kills the process that waits here; a stdio MCP server outliving its parent
    # (aptix serve, killed) leaves instead of waiting for ever.
    for _ in range(1200):
        await asyncio.sleep(0.05)
        if os.getppid() != parent:
            os._exit(0)
    raise RuntimeError(f"not killed at {point} within 60 s")
