"""Property-based: no input makes a registered tool raise; every call gives an InvokeResult."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aptix import InvokeResult
from aptix.runtime import BUILTIN_TOOLS, Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolExecutionContext

NAMES = [t.TOOL_NAME for t in BUILTIN_TOOLS]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


class _Harness:
    """One event loop and one runtime for all examples (engines are bound to their loop)."""

    def __init__(self, data_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self._cm = open_runtime(AptixSettings(data_dir=data_dir, load_plugins=False))
        self.runtime: Runtime = self.loop.run_until_complete(self._cm.__aenter__())
        created = self.loop.run_until_complete(
            self.runtime.services.sessions.create_session(org="o", user="u")
        )
        assert created.result is not None
        self.context = AgentToolExecutionContext(
            session_id=created.result.id, conversation_id="c", org="o", user="u"
        )

    def run(self, name: str, arguments_json: str) -> InvokeResult[str]:
        tool = self.runtime.registry.get_tool(name)
        assert tool is not None
        return self.loop.run_until_complete(tool.execute(arguments_json, self.context))

    def close(self) -> None:
        self.loop.run_until_complete(self._cm.__aexit__(None, None, None))
        self.loop.close()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Harness]:
    h = _Harness(tmp_path_factory.mktemp("properties"))
    yield h
    h.close()


def _check(outcome: Any) -> None:
    assert isinstance(outcome, InvokeResult)
    if outcome.successful:
        assert isinstance(json.loads(outcome.result), dict)
    else:
        assert outcome.error_message
        assert "Traceback" not in outcome.error_message


@pytest.mark.parametrize("name", NAMES)
def test_arbitrary_strings_never_raise(harness: _Harness, name: str) -> None:
    @given(st.text())
    def check(text: str) -> None:
        _check(harness.run(name, text))

    check()


@pytest.mark.parametrize("name", NAMES)
def test_arbitrary_json_values_never_raise(harness: _Harness, name: str) -> None:
    tool_cls = next(t for t in BUILTIN_TOOLS if name == t.TOOL_NAME)
    keys = list(tool_cls.schema()["parameters"]["properties"])
    objects = st.fixed_dictionaries({}, optional={k: json_values for k in keys})

    @given(json_values | objects)
    def check(value: Any) -> None:
        _check(harness.run(name, json.dumps(value)))

    check()


@given(
    st.recursive(
        st.integers(-(10**6), 10**6).map(str) | st.floats(0, 1e6).map(lambda f: f"{f:.3f}"),
        lambda inner: st.tuples(
            inner, st.sampled_from(["+", "-", "*", "/", "//", "%", "**"]), inner
        ).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        max_leaves=8,
    )
)
def test_calculator_never_raises_on_generated_arithmetic(expression: str) -> None:
    from aptix.testing import RecordingLogger
    from aptix.tools.builtin.calculator import CalculatorTool

    outcome = asyncio.run(
        CalculatorTool(RecordingLogger()).execute(
            json.dumps({"expression": expression}), AgentToolExecutionContext()
        )
    )
    _check(outcome)
