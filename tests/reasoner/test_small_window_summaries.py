"""Under ``summarize``, a small ``APTIX_HISTORY_TURNS`` window does not cost a summary a turn.

Review s1 F3 (round 67): turns leaving the window are folded into the summary with a quarter
of the window ahead, so that one summary request serves several turns; a quarter of a window
of 1-3 turns is none, so once the session was longer than the window every turn made a
summary request before its own (twice the model requests). At least one turn is folded ahead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel
from tests.reasoner.test_summary_takes_turns_leaving_the_window import (
    _answer,
    _coverage,
    _is_summary_request,
    _session,
)


@pytest.mark.parametrize("window", [1, 2, 3, 4, 8])
async def test_one_summary_request_serves_more_than_one_turn(tmp_path: Path, window: int) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}",
        load_plugins=False,
        context_strategy="summarize",
        history_turns=window,
    )
    async with open_runtime(settings) as runtime:
        session_id = await _session(runtime)
        model = FunctionModel(_answer)
        reasoner = runtime.reasoner(model)
        summarizing: list[int] = []
        total = window + 12
        for n in range(1, total + 1):
            before = len(model.requests)
            result = await reasoner.execute(
                session_id=session_id, org="acme", user="ann", instruction=f"T{n} short"
            )
            assert result.kind == "ok", result.error
            assert not result.warnings
            made = model.requests[before:]
            if any(_is_summary_request(r) for r in made):
                summarizing.append(n)
            # Every earlier turn is still in the summary or sent, exactly once.
            summary, kept = _coverage(made[-1])
            assert sorted(summary + kept) == list(range(1, n)), (n, summary, kept)
        # The first turn past the window folds the turn that left it and a quarter of the
        # window (at least one turn) ahead: one summary request per (1 + ahead) turns.
        every = 1 + max(1, window // 4)
        assert summarizing == list(range(window + 2, total + 1, every)), summarizing
