"""The benchmarks' environment defaults get their options' checks (review s2 F3, round 69).

``BENCH_ROUNDS``, ``BENCH_LONG_TURNS`` and ``BENCH_SECONDS`` are read when ``main`` parses its
arguments, as the defaults of ``--rounds``, ``--long-turns`` and ``--seconds``: a bad value is
the same one-line error as a bad option (naming the variable), not a traceback at import, and
``--help`` works whatever they hold. No test runs a benchmark: each stops in ``argparse``, or
runs a stand-in that records what the benchmark would have been given.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
VARIABLES = ("BENCH_ROUNDS", "BENCH_LONG_TURNS", "BENCH_SECONDS")
#: The coroutine function each benchmark's ``main`` runs, replaced by a stand-in here.
RUNNER = {"processes": "run", "turns": "_run", "http": "_run"}


@pytest.fixture(autouse=True)
def _no_bench_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)


def _bench(name: str, variable: str, value: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    return subprocess.run(
        [sys.executable, "-m", f"bench.{name}", *argv],
        cwd=ROOT,
        env={**env, variable: value, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


CASES = [
    ("processes", "BENCH_ROUNDS", "2OO", "argument --rounds: not a whole number: '2OO'"),
    ("processes", "BENCH_SECONDS", "fast", "argument --seconds: not a number: 'fast'"),
    ("turns", "BENCH_ROUNDS", "2OO", "argument --rounds: not a whole number: '2OO'"),
    ("turns", "BENCH_LONG_TURNS", "many", "argument --long-turns: not a whole number: 'many'"),
    ("turns", "BENCH_SECONDS", "fast", "argument --seconds: not a number: 'fast'"),
    ("http", "BENCH_SECONDS", "fast", "argument --seconds: not a number: 'fast'"),
]


@pytest.mark.parametrize(("name", "variable", "value", "error"), CASES)
def test_help_works_whatever_the_variables_hold(
    name: str, variable: str, value: str, error: str
) -> None:
    done = _bench(name, variable, value, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m bench.{name}")
    assert f"default: {variable} or" in " ".join(done.stdout.split())
    assert done.stderr == ""


@pytest.mark.parametrize(("name", "variable", "value", "error"), CASES)
def test_a_mistyped_variable_is_a_one_line_error_naming_it(
    name: str, variable: str, value: str, error: str
) -> None:
    done = _bench(name, variable, value)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1] == (
        f"python -m bench.{name}: error: {error} (from {variable})"
    )


def _stand_in(monkeypatch: pytest.MonkeyPatch, name: str) -> tuple[Any, list[tuple[Any, ...]]]:
    """``bench.<name>`` with its run replaced by one that records its arguments."""
    module = importlib.import_module(f"bench.{name}")
    given: list[tuple[Any, ...]] = []

    async def recorded(*args: Any) -> None:
        given.append(args[1:])  # after the Targets

    monkeypatch.setattr(module, RUNNER[name], recorded)
    return module, given


@pytest.mark.parametrize(
    ("name", "variable", "value", "error"),
    [
        ("processes", "BENCH_ROUNDS", "0", "argument --rounds: must be at least 1: 0"),
        ("processes", "BENCH_SECONDS", "-1", "must be a positive number of seconds: '-1'"),
        ("turns", "BENCH_ROUNDS", "-3", "argument --rounds: must be at least 1: -3"),
        ("turns", "BENCH_LONG_TURNS", "0", "argument --long-turns: must be at least 1: 0"),
        ("turns", "BENCH_SECONDS", "0", "must be a positive number of seconds: '0'"),
        ("http", "BENCH_SECONDS", "-1", "argument --seconds: must be a positive number"),
        ("http", "BENCH_SECONDS", "inf", "must be a positive number of seconds: 'inf'"),
        ("http", "BENCH_SECONDS", "nan", "must be a positive number of seconds: 'nan'"),
    ],
)
def test_a_variable_out_of_range_is_refused_as_the_option_would_be(
    name: str,
    variable: str,
    value: str,
    error: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    module, given = _stand_in(monkeypatch, name)
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as stopped:
        module.main(["--http"] if name == "turns" else [])
    assert stopped.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"python -m bench.{name}: error: argument --")
    assert error in last
    assert last.endswith(f" (from {variable})")
    assert given == []


def test_the_variables_are_the_defaults_and_an_option_given_wins(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    processes, given = _stand_in(monkeypatch, "processes")
    monkeypatch.setenv("BENCH_ROUNDS", "7")
    monkeypatch.setenv("BENCH_SECONDS", "0.5")
    assert processes.main([]) == 0
    assert given == [(7, 0.5)]
    # A bad variable is not read when its option is given.
    monkeypatch.setenv("BENCH_ROUNDS", "2OO")
    assert processes.main(["--rounds", "3"]) == 0
    assert given[-1] == (3, 0.5)
    # An option given is checked as before, without naming the variable.
    with pytest.raises(SystemExit):
        processes.main(["--rounds", "0"])
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("argument --rounds: must be at least 1: 0")
    )

    turns, seen = _stand_in(monkeypatch, "turns")
    monkeypatch.setenv("BENCH_ROUNDS", "9")
    monkeypatch.setenv("BENCH_LONG_TURNS", "11")
    assert turns.main(["--http"]) == 0
    (args,) = seen[0]
    assert isinstance(args, argparse.Namespace)
    assert (args.rounds, args.long_turns, args.seconds) == (9, 11, 0.5)

    http, timed = _stand_in(monkeypatch, "http")
    monkeypatch.delenv("BENCH_SECONDS")
    assert http.main([]) == 0
    assert timed == [(4.0,)]
