"""Tiny helpers shared by the benchmarks: timing batches, reading options, printing a table."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence


async def per_call_us(
    fn: Callable[[], Awaitable[object]], *, batch: int = 2_000, batches: int = 30
) -> float:
    """Median over batches of the mean µs per call (batches smooth out timer resolution)."""
    for _ in range(batch):  # warm-up
        await fn()
    samples = []
    for _ in range(batches):
        start = time.perf_counter_ns()
        for _ in range(batch):
            await fn()
        samples.append((time.perf_counter_ns() - start) / batch / 1_000)
    return statistics.median(samples)


async def interleaved_us(
    fns: Sequence[Callable[[], Awaitable[object]]], *, batch: int = 1_000, rounds: int = 60
) -> list[float]:
    """Median µs per call of each function, measured in alternating batches.

    Alternating batches expose every candidate to the same machine load, so the ratios
    between them hold even on a shared, noisy machine.
    """
    for fn in fns:
        for _ in range(batch):
            await fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.perf_counter_ns()
            for _ in range(batch):
                await fn()
            samples[i].append((time.perf_counter_ns() - start) / batch / 1_000)
    return [statistics.median(s) for s in samples]


def sync_per_call_us(fn: Callable[[], object], *, batch: int = 2_000, batches: int = 30) -> float:
    """Like :func:`per_call_us` for a plain function."""
    for _ in range(batch):
        fn()
    samples = []
    for _ in range(batches):
        start = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter_ns() - start) / batch / 1_000)
    return statistics.median(samples)


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a Markdown table, so results paste straight into notes."""
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


class _FromEnvironment(str):
    """An option's default as set in an environment variable (named in ``variable``)."""

    variable: str


def environment_default(variable: str, fallback: str) -> str:
    """An option's default: the text of ``variable`` when it is set, else ``fallback``.

    Text, not a number: argparse runs the option's type on a default given as text (and only
    when the option is not given), so the variable's value gets the option's checks and a bad
    one is the same one-line error, naming the variable, instead of a traceback at import.
    """
    value = os.environ.get(variable)
    if value is None:
        return fallback
    text = _FromEnvironment(value)
    text.variable = variable
    return text


def type_error(text: str, message: str) -> argparse.ArgumentTypeError:
    """An ``argparse`` type's refusal of ``text``; one set in the environment names its variable."""
    if isinstance(text, _FromEnvironment):
        message = f"{message} (from {text.variable})"
    return argparse.ArgumentTypeError(message)


def positive_int(text: str) -> int:
    """An ``argparse`` type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise type_error(text, f"not a whole number: {text!r}") from None
    if value < 1:
        raise type_error(text, f"must be at least 1: {value}")
    return value


def positive_seconds(text: str) -> float:
    """An ``argparse`` type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise type_error(text, f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise type_error(text, f"must be a positive number of seconds: {text!r}")
    return value


def bench_parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    """The argument parser of ``python -m <name>``, its docstring as the description."""
    return argparse.ArgumentParser(
        prog=f"python -m {name}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_rounds(parser: argparse.ArgumentParser, what: str) -> None:
    """``--rounds``: how many ``what``, from ``BENCH_ROUNDS`` or 200."""
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=environment_default("BENCH_ROUNDS", "200"),
        help=f"{what} (default: BENCH_ROUNDS or 200)",
    )


def add_seconds(parser: argparse.ArgumentParser, what: str) -> None:
    """``--seconds``: how long ``what`` lasts, from ``BENCH_SECONDS`` or 4."""
    parser.add_argument(
        "--seconds",
        type=positive_seconds,
        default=environment_default("BENCH_SECONDS", "4"),
        help=f"{what} (default: BENCH_SECONDS or 4)",
    )


def positive_ints(text: str) -> list[int]:
    """An ``argparse`` type: comma-separated whole numbers of at least 1."""
    return [positive_int(part.strip()) for part in text.split(",")]


def _figure(value: float) -> str:
    """A figure at a precision that reads well whatever its size."""
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def verdict(met: bool) -> str:
    """What a table title says of its targets."""
    return "met" if met else "NOT met"


class Targets:
    """The targets one run of a benchmark states, each checked against a figure of that run.

    A miss is remembered with its row and by how much it missed; :meth:`finish` prints them
    all after the last table and gives the exit status, so a person and CI both see it.
    """

    def __init__(self, bench: str) -> None:
        self.bench = bench
        self.checked = 0
        self.missed: list[str] = []

    def at_most(self, row: str, value: float, limit: float, unit: str = "") -> bool:
        """Whether ``value`` ≤ ``limit``; a miss is remembered."""
        return self._check(row, value, limit, unit, value <= limit, "≤")

    def at_least(self, row: str, value: float, limit: float, unit: str = "") -> bool:
        """Whether ``value`` ≥ ``limit``; a miss is remembered."""
        return self._check(row, value, limit, unit, value >= limit, "≥")

    def below(self, row: str, value: float, limit: float, unit: str = "") -> bool:
        """Whether ``value`` < ``limit``; a miss is remembered."""
        return self._check(row, value, limit, unit, value < limit, "<")

    def _check(
        self, row: str, value: float, limit: float, unit: str, met: bool, relation: str
    ) -> bool:
        self.checked += 1
        if not met:
            self.missed.append(
                f"{row}: {_figure(value)}{unit}, target {relation} {_figure(limit)}{unit}, "
                f"missed by {_figure(abs(value - limit))}{unit}"
            )
        return met

    def finish(self, none: str = "it states no target") -> int:
        """Print the outcome after the last table; the exit status: 1 when a target was missed.

        ``none`` says why nothing was checked, for a run that checked no target.
        """
        if not self.checked:
            print(
                f"\n{self.bench}: no target checked ({none}); exit status 0 says only that it ran."
            )
            return 0
        if not self.missed:
            noun = "targets" if self.checked > 1 else "target"
            print(f"\n{self.bench}: all {self.checked} {noun} met.")
            return 0
        print(f"\n{self.bench}: {len(self.missed)} of {self.checked} targets NOT met:")
        for line in self.missed:
            print(f"- {line}")
        return 1
