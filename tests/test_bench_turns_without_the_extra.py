"""``bench.turns`` without the ``bench`` extra says in one line what to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The extra may be installed here: hiding its first module makes the run see it missing.
WITHOUT_LANGCHAIN = (
    "import runpy, sys; sys.modules['langchain_core'] = None; "
    "runpy.run_module('bench.turns', run_name='__main__', alter_sys=True)"
)


def test_it_names_the_extra_instead_of_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_LANGCHAIN],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("python -m bench.turns: needs the bench extra")
    assert 'pip install -e ".[bench]"' in lines[0]
    assert "--http" in lines[0]
