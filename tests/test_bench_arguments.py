"""Every benchmark parses its arguments: ``--help`` prints usage, a mistyped option is an error.

Neither runs the benchmark: both stop in ``argparse`` before any work.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

BENCHES = [
    "tools",
    "reasoner",
    "sessions",
    "http",
    "processes",
    "turns",
    "http_server",
    "workflows",
    "match_ab",
]
#: Arguments a bench requires, given so that only the mistyped option is wrong.
REQUIRED = {"http_server": ["19700"], "match_ab": ["HEAD"]}
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", BENCHES)
def test_help_prints_usage(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(f"bench.{name}")
    with pytest.raises(SystemExit) as stopped:
        module.main(["--help"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m bench.{name}")


@pytest.mark.parametrize("name", BENCHES)
def test_a_mistyped_option_is_one_line_error(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(f"bench.{name}")
    with pytest.raises(SystemExit) as stopped:
        module.main([*REQUIRED.get(name, []), "--bogus"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"python -m bench.{name}: error: unrecognized arguments: --bogus"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--htpp"], "unrecognized arguments: --htpp"),
        (["--rounds", "0"], "argument --rounds: must be at least 1: 0"),
        (["--long-turns", "many"], "argument --long-turns: not a whole number: 'many'"),
    ],
)
def test_turns_options(argv: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    import bench.turns

    with pytest.raises(SystemExit) as stopped:
        bench.turns.main(argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(error)


def test_the_module_entry_point_parses_too() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.reasoner", "--bogus"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "error: unrecognized arguments: --bogus" in done.stderr
