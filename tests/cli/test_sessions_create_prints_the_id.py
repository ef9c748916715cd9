"""``aptix sessions create`` prints the new session's id alone, as its help says (review r2, F6).

It printed "Created session <id> in mode <mode>." into a pipe too, so the README's
``S=$(aptix sessions create)`` followed by ``--session-id "$S"`` failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _aptix(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aptix", *args],
        env={**os.environ, "APTIX_DATA_DIR": str(tmp_path), "APTIX_SEMANTIC_MATCHING": "false"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_id_printed_into_a_pipe_is_the_next_commands_session_id(tmp_path: Path) -> None:
    created = _aptix(tmp_path, "sessions", "create", "--mode", "calculation")
    assert created.returncode == 0, created.stderr
    session_id = created.stdout.removesuffix("\n")
    assert len(session_id) == 32
    assert created.stdout == f"{session_id}\n"
    assert created.stderr == ""  # not a terminal: the mode is for a person to read
    shown = _aptix(tmp_path, "sessions", "show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert '"mode": "calculation"' in shown.stdout
