"""The crash matrix's gate: a process marks that it reached a point, then waits to be killed.

Shared by the tool module and the MCP server of ``test_crash_matrix.py``. ``CRASH_DIR`` is
the directory the test watches. Each call is known by a key (its invoice or target), and the
file ``crash-at-<key>`` names the point where that call stops (no file: never stop), so the
calls of one process can each wait at a different point when the process is killed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


def record_run(key: str) -> None:
    """Append one line per run of call ``key``: the side effect the test counts (durable)."""
    with open(Path(os.environ["CRASH_DIR"]) / f"runs-{key}", "a", encoding="utf-8") as f:
        f.write("run\n")
        f.flush()
        os.fsync(f.fileno())


async def gate(point: str, key: str) -> None:
    """At ``point`` (if ``crash-at-<key>`` names it): say so with a file, then wait for the kill."""
    crash_dir = Path(os.environ["CRASH_DIR"])
    wanted = crash_dir / f"crash-at-{key}"
    if not wanted.exists() or wanted.read_text() != point:
        return
    (crash_dir / f"reached-{key}-{point}").write_text(str(os.getpid()))
    parent = os.getppid()
    # The test kills the process that waits here; a stdio MCP server outliving its parent
    # (aptix serve, killed) leaves instead of waiting for ever.
    for _ in range(1200):
        await asyncio.sleep(0.05)
        if os.getppid() != parent:
            os._exit(0)
    raise RuntimeError(f"not killed at {point} within 60 s")
