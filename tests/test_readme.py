"""Every Python sample in the README runs, so the docs cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_the_readme_has_samples() -> None:
    assert SAMPLES


@pytest.mark.parametrize("source", SAMPLES, ids=[f"sample-{i}" for i in range(len(SAMPLES))])
def test_readme_sample_runs(source: str) -> None:
    exec(compile(source, str(README), "exec"), {"__name__": "readme_sample"})
