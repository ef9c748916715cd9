"""Tiny helpers shared by the benchmarks: timing batches, reading options, printing a table."""

from __future__ import annotations

import argparse
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


def positive_int(text: str) -> int:
    """An ``argparse`` type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def positive_ints(text: str) -> list[int]:
    """An ``argparse`` type: comma-separated whole numbers of at least 1."""
    return [positive_int(part.strip()) for part in text.split(",")]
