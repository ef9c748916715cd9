"""A mode whose own instructions fill the context budget is named, at start-up and per turn."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import pytest
import yaml

from aptix.reasoner.context import ContextBudget, ContextOverflowError, EstimatedTokens
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply

BUDGET = 6000
#: About 7,900 tokens at the estimate: more than the whole budget.
RULES = "Follow the house rules carefully. " * 700


def _catalog(folder: Path, instructions: str) -> Path:
    """The built-in catalog with its default mode's instructions replaced."""
    text = resources.files("aptix.modes").joinpath("catalog.yaml").read_text(encoding="utf-8")
    document = yaml.safe_load(text)
    general = next(m for m in document["modes"] if m["isDefault"])
    general["instructions"] = instructions
    path = folder / "modes.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@contextmanager
def _warnings(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Capture the reasoner's log: once Aptix configures logging, ``aptix`` does not propagate."""
    logger = logging.getLogger("aptix.reasoner")
    logger.addHandler(caplog.handler)
    try:
        yield
    finally:
        logger.removeHandler(caplog.handler)


def test_an_overflow_names_the_mode_instructions_when_they_take_the_room() -> None:
    budget = ContextBudget(BUDGET, counter=EstimatedTokens())
    system = {"role": "system", "content": f"{RULES}\n\nCurrent mode: general (General)."}
    with pytest.raises(ContextOverflowError) as caught:
        budget.fit(system, [], [{"role": "user", "content": "hi"}], [], instructions=RULES)
    message = str(caught.value)
    assert "The mode's instructions take about 7933 of the system message's" in message
    assert "Shorten the mode's instructions (the mode catalog, APTIX_MODES_PATH)" in message
    assert "Shorten the instruction or" not in message


async def test_start_up_warns_of_a_mode_that_leaves_no_room_and_its_turns_say_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        llm_context_tokens=BUDGET,
        modes_path=_catalog(tmp_path, RULES),
    )
    model = FunctionModel(lambda request: reply("ok"))
    async with open_runtime(settings) as runtime:
        with _warnings(caplog):
            reasoner = runtime.reasoner(model)
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        result = await reasoner.execute(
            session_id=created.result.id, org="acme", user="ann", instruction="hi"
        )
    [warning] = [r.getMessage() for r in caplog.records if r.name == "aptix.reasoner"]
    assert warning.startswith(f"Mode '{runtime.services.modes.default_mode.key}' leaves no room")
    assert f"the context budget of {BUDGET} tokens (APTIX_LLM_CONTEXT_TOKENS)" in warning
    assert "every turn in it ends with context_overflow" in warning
    assert "The mode's instructions take about 7933 of the system message's" in warning
    assert result.kind == "error"
    assert result.error is not None
    assert "The mode's instructions take about 7933" in result.error
    assert "Shorten the instruction or" not in result.error
    assert model.requests == []


async def test_a_mode_that_fits_is_not_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        llm_context_tokens=BUDGET,
        modes_path=_catalog(tmp_path, "Answer briefly."),
    )
    async with open_runtime(settings) as runtime:
        with _warnings(caplog):
            runtime.reasoner(FunctionModel(lambda request: reply("ok")))
    assert [r for r in caplog.records if r.name == "aptix.reasoner"] == []
