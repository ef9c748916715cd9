"""Ctrl-C while ``aptix chat`` opens its database ends it quietly with exit code 130.

Review s2, F2 (round 69): the Ctrl-C cancelled the SQLite connect halfway, aiosqlite's thread
answered after the event loop had closed ("Exception in thread ... Event loop is closed",
a traceback), and the chat swallowed the interrupt: exit code 0, where every other command
exits 130.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Loaded by Python at start-up: the first SQLite connect of aiosqlite's thread sends the real
# Ctrl-C (SIGINT) and is held until the event loop closes, the worst moment for its answer.
# A loop that never closes while the connect is pending lets it go after HOLD_SECONDS. The
# process waits for that thread before it ends: a daemon, it would be cut off unheard.
SITECUSTOMIZE = """
import asyncio.base_events, atexit, os, signal, sqlite3, threading

HOLD_SECONDS = 3.0
closed = threading.Event()
_close = asyncio.base_events.BaseEventLoop.close
_connect = sqlite3.connect


def close(self):
    closed.set()
    _close(self)


def connect(*args, **kwargs):
    marker = os.environ.get("CTRL_C_MARKER")
    if marker and "_connection_worker_thread" in threading.current_thread().name:
        os.environ.pop("CTRL_C_MARKER")
        atexit.register(threading.current_thread().join, HOLD_SECONDS)
        signal.raise_signal(signal.SIGINT)
        with open(marker, "w") as written:
            written.write("sent")
        closed.wait(HOLD_SECONDS)
    return _connect(*args, **kwargs)


asyncio.base_events.BaseEventLoop.close = close
sqlite3.connect = connect
"""


def test_ctrl_c_while_the_chat_opens_its_database_exits_130_without_a_traceback(
    tmp_path: Path,
) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    marker = tmp_path / "ctrl-c-sent"
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "APTIX_DATA_DIR": str(tmp_path / "data"),
        "APTIX_SEMANTIC_MATCHING": "false",
        "CTRL_C_MARKER": str(marker),
        "NO_COLOR": "1",
    }
    script = Path(sys.executable).parent / "aptix"  # the console script, as installed
    done = subprocess.run(
        [str(script), "chat", "--demo"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert marker.read_text() == "sent"  # the Ctrl-C came while the connect was under way
    assert done.returncode == 130, done.stderr
    assert done.stderr == ""
    assert done.stdout.strip() == ""
