"""Every Python sample in the README and docs/ runs, so the docs cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Pages whose samples talk to a running server: their own tests run them against one.
LIVE_PAGES = {"openai-compatible.md": "tests/api/test_openai_docs.py"}
SAMPLES = [
    (page, source)
    for page in PAGES
    if page.name not in LIVE_PAGES
    for source in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
]


def test_the_docs_have_samples() -> None:
    assert {page.name for page, _ in SAMPLES} >= {"README.md", "writing-a-tool.md"}


@pytest.mark.parametrize(
    ("page", "source"), SAMPLES, ids=[f"{p.name}-{i}" for i, (p, _) in enumerate(SAMPLES)]
)
def test_doc_sample_runs(page: Path, source: str) -> None:
    exec(compile(source, str(page), "exec"), {"__name__": "doc_sample"})


def test_docs_link_to_pages_that_exist() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(([\w./-]+\.md)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
