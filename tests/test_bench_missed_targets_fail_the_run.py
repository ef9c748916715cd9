"""A benchmark that misses a target it states says which row missed by how much, and exits 1."""

from __future__ import annotations

import pytest

import bench.reasoner
from bench._table import Targets


def test_a_miss_names_its_row_and_gap_and_fails_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    targets = Targets("bench.x")
    assert targets.at_most("dispatch, 30 s timeout", 12.45, 3, " µs") is False
    assert targets.at_least("invoke, 16 connections", 2_500, 2_000, " req/s") is True
    assert targets.below("turns 301+ vs 1-20", 1.5, 1.5, "×") is False
    assert targets.finish() == 1
    out = capsys.readouterr().out
    assert "bench.x: 2 of 3 targets NOT met:" in out
    assert "- dispatch, 30 s timeout: 12.4 µs, target ≤ 3 µs, missed by 9.45 µs" in out
    assert "- turns 301+ vs 1-20: 1.50×, target < 1.50×, missed by 0×" in out
    assert "invoke" not in out


def test_targets_all_met_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    targets = Targets("bench.x")
    assert targets.at_most("ratio", 1.0, 1.1, "×")
    assert targets.finish() == 0
    assert "bench.x: all 1 target met." in capsys.readouterr().out


def test_a_bench_without_targets_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert Targets("bench.sessions").finish() == 0
    assert "bench.sessions: no target checked (it states no target)" in capsys.readouterr().out


@pytest.fixture
def quick_reasoner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench.reasoner, "TURNS", {0: 3, 1: 3, 10: 3})
    monkeypatch.setattr(bench.reasoner, "PERSISTENT_TURNS", 3)


def test_the_reasoner_bench_fails_when_it_misses(
    quick_reasoner: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench.reasoner, "ROUND_TRIP_US", -1_000_000)
    monkeypatch.setattr(bench.reasoner, "MARGINAL_US", 10**12)
    assert bench.reasoner.main([]) == 1
    out = capsys.readouterr().out
    assert (
        "(targets without persistence: +1 round trip ≤ -1,000,000, "
        "marginal tool call ≤ 1,000,000,000,000): NOT met" in out
    )
    assert "bench.reasoner: 1 of 2 targets NOT met:" in out
    assert "- +1 round trip, persistence off (in memory): " in out


def test_the_reasoner_bench_passes_when_it_meets(
    quick_reasoner: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench.reasoner, "ROUND_TRIP_US", 10**12)
    monkeypatch.setattr(bench.reasoner, "MARGINAL_US", 10**12)
    assert bench.reasoner.main([]) == 0
    out = capsys.readouterr().out
    assert "bench.reasoner: all 2 targets met." in out


async def test_the_tools_bench_checks_every_target_it_states(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.tools

    # Table 1: floor, direct call, executor with and without a timeout; table 2: decorator,
    # class, decorator called directly (and Pydantic AI when the extra is installed).
    fixed = iter([[2.0, 5.0, 12.45, 6.0], [16.0, 10.0, 12.0, 3.5]])

    async def timings(fns: list[object], **_: object) -> list[float]:
        return next(fixed)[: len(fns)]

    monkeypatch.setattr(bench.tools, "interleaved_us", timings)
    targets = Targets("bench.tools")
    await bench.tools.executor_table(targets)
    await bench.tools.decorator_table(targets)
    assert targets.finish() == 1
    out = capsys.readouterr().out
    assert "target: dispatch ≤ 3 µs, ≤ 3× floor): NOT met" in out
    assert "Decorator ÷ class = 1.60× (target ≤ 1.10×): NOT met" in out
    assert "bench.tools: 3 of 5 targets NOT met:" in out
    assert "- executor dispatch, 30 s timeout: 7.45 µs, target ≤ 3 µs, missed by 4.45 µs" in out
    assert "- executor ÷ floor, 30 s timeout: 6.22×, target ≤ 3×, missed by 3.22×" in out
    assert "- decorator ÷ class: 1.60×, target ≤ 1.10×, missed by 0.50×" in out
