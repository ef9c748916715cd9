"""APTIX_MATCH_ARBITER on with no model configured says so once at start-up, never silently."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import aptix.runtime
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings

WARNING = (
    "APTIX_MATCH_ARBITER={} is off: no model is configured (set APTIX_LLM_MODEL, and "
    "APTIX_LLM_BASE_URL for a server of your own); the ranker and the gate decide alone."
)


def _settings(tmp_path: Path, **extra: object) -> AptixSettings:
    chosen: dict[str, object] = {"llm_model": None, **extra}
    return AptixSettings(data_dir=tmp_path, semantic_matching=False, load_plugins=False, **chosen)


class Records(logging.Handler):
    """Every record of the logger it is added to (the runtime's logging does not propagate)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def said(self) -> list[logging.LogRecord]:
        return [r for r in self.records if "APTIX_MATCH_ARBITER" in r.getMessage()]


@pytest.fixture
def records(monkeypatch: pytest.MonkeyPatch) -> Iterator[Records]:
    monkeypatch.setattr(aptix.runtime, "_WARNED", set())  # as in a new process
    handler = Records()
    logger = logging.getLogger("aptix.workflows")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("mode", ["ambiguous", "always"])
async def test_an_arbiter_without_a_model_warns_once_per_process(
    tmp_path: Path, records: Records, mode: str
) -> None:
    # As `aptix serve` does: a runtime that checks the configuration, then the served one.
    for _ in range(2):
        async with open_runtime(_settings(tmp_path, match_arbiter=mode)) as runtime:
            assert runtime.workflows.registry.arbiter is None
    (record,) = records.said()
    assert record.getMessage() == WARNING.format(mode)
    assert record.levelno == logging.WARNING


async def test_an_arbiter_with_a_model_or_turned_off_says_nothing(
    tmp_path: Path, records: Records
) -> None:
    async with open_runtime(_settings(tmp_path, match_arbiter="off")):
        pass
    modelled = _settings(
        tmp_path, match_arbiter="always", llm_model="m", llm_base_url="http://127.0.0.1:9/v1"
    )
    async with open_runtime(modelled) as runtime:
        assert runtime.workflows.registry.arbiter is not None
    assert records.said() == []
