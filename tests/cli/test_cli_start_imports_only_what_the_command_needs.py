"""Starting the ``aptix`` command line loads no database, reasoner or workflow stack.

Every command, ``aptix --help`` included, imports :mod:`aptix.cli.app` first: what it imports
is paid on every start. Each command imports what it needs when it runs.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: Modules only a command that runs turns, opens the database or matches workflows needs.
HEAVY = ("sqlalchemy", "numpy", "aptix.reasoner", "aptix.db", "aptix.workflows", "aptix.runtime")


def _loaded_after(statement: str) -> list[str]:
    """The modules of :data:`HEAVY` in ``sys.modules`` after ``statement``, in a fresh process."""
    probe = (
        f"import json, sys\n{statement}\n"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_importing_the_cli_app_loads_no_database_reasoner_or_workflows() -> None:
    assert _loaded_after("import aptix.cli.app") == []


def test_help_loads_no_database_reasoner_or_workflows() -> None:
    statement = (
        "from typer.testing import CliRunner\n"
        "from aptix.cli.app import app\n"
        "done = CliRunner().invoke(app, ['--help'])\n"
        "assert done.exit_code == 0, done.output\n"
        "assert 'chat' in done.output"
    )
    assert _loaded_after(statement) == []


def test_chat_help_loads_no_database_reasoner_or_workflows() -> None:
    statement = (
        "from typer.testing import CliRunner\n"
        "from aptix.cli.app import app\n"
        "done = CliRunner().invoke(app, ['chat', '--help'])\n"
        "assert done.exit_code == 0, done.output\n"
        "assert '--session-id' in done.output"
    )
    assert _loaded_after(statement) == []
