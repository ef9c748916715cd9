"""bench/reasoner.py drives the reasoner it measures (its timings are printed, never tested)."""

from __future__ import annotations

from pathlib import Path

import pytest

import bench.reasoner
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings


@pytest.mark.parametrize("persistent", [False, True])
async def test_the_bench_runs_turns_that_end_ok(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, persistent: bool
) -> None:
    monkeypatch.setattr(bench.reasoner, "TURNS", {1: 3})
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with open_runtime(settings) as runtime:
        median_us = await bench.reasoner._per_turn_us(runtime, 1, persistent)
    assert median_us > 0
