"""The README's sessions commands run as pasted, in order, each exiting 0 (review r5 F2, round 72).

The sequence ran ``aptix sessions cancel-workflow`` on a session with no active workflow:
``error: The session has no active workflow.`` and exit code 1 on a line the README offered as
working.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _sessions_block() -> str:
    section = README.read_text(encoding="utf-8").split("## Sessions and modes", 1)[1]
    found = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert found, "the README's sessions commands moved"
    return found.group(1)


def test_the_readme_sessions_commands_each_exit_0(tmp_path: Path) -> None:
    block = _sessions_block()
    assert "aptix sessions cancel-workflow" in block
    # "[--json]" marks what may be added: the commands run as they are without it.
    script = re.sub(r" \[[^]]*\]", "", block)
    # None of the shell's APTIX_* variables: prune must not reach a shared database.
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("APTIX_")}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", 'aptix() { "$PYTHON" -m aptix "$@"; }\n' + script],
        env=env
        | {
            "PYTHON": sys.executable,
            "APTIX_DATA_DIR": str(tmp_path),
            "APTIX_SEMANTIC_MATCHING": "false",
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Cancelled workflow guided_calculation of session" in done.stdout
