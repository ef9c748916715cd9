"""Ctrl-C while the ``aptix`` script still imports ends it quietly with exit code 130.

Review r2, F3: the script imported the whole application (reasoner, workflows, matching:
seconds on a loaded machine) before anything handled an interrupt, so a Ctrl-C in the first
seconds of any command printed a 30-line KeyboardInterrupt traceback. The command line itself
(:mod:`aptix.cli.app`) is imported first; the reasoner and the rest when a command runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Loaded by Python at start-up, before the script runs: the real Ctrl-C (SIGINT) arrives as
# the heavy part of the application is imported.
SITECUSTOMIZE = """
import os, signal, sys


class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ.get("CTRL_C_AT"):
            sys.meta_path.remove(self)
            signal.raise_signal(signal.SIGINT)
        return None


sys.meta_path.insert(0, CtrlC())
"""


@pytest.mark.parametrize(
    ("args", "module"),
    [
        # The version, read on first use: importing aptix (before the script's code) took it.
        (["--version"], "importlib.metadata"),
        (["--version"], "aptix.cli.chat"),  # the command line's own imports
        (["sessions", "list"], "aptix.reasoner"),  # what the command imports as it runs
    ],
)
def test_ctrl_c_during_the_imports_exits_130_without_a_traceback(
    args: list[str], module: str, tmp_path: Path
) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "APTIX_DATA_DIR": str(tmp_path / "data"),
        "CTRL_C_AT": module,
    }
    script = Path(sys.executable).parent / "aptix"  # the console script, as installed
    done = subprocess.run(
        [str(script), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == ""
    assert done.stdout == ""
