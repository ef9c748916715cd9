"""Property-based: no input makes a registered tool raise; every call gives an InvokeResult."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aptix import InvokeResult
from aptix.runtime import build_registry
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext

REGISTRY = build_registry(RecordingLogger(), plugins=False)
CONTEXT = AgentToolExecutionContext(session_id="0" * 32, conversation_id="c", org="o", user="u")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


def _tool_keys(name: str) -> list[str]:
    tool_cls = REGISTRY.get_tool_type(name)
    assert tool_cls is not None
    return list(tool_cls.schema()["parameters"]["properties"])


def _run(name: str, arguments_json: str) -> InvokeResult[str]:
    tool = REGISTRY.get_tool(name)
    assert tool is not None
    return asyncio.run(tool.execute(arguments_json, CONTEXT))


def _check(outcome: Any) -> None:
    assert isinstance(outcome, InvokeResult)
    if outcome.successful:
        assert isinstance(json.loads(outcome.result), dict)
    else:
        assert outcome.error_message
        assert "Traceback" not in outcome.error_message


@pytest.mark.parametrize("name", REGISTRY.registered_tools)
def test_arbitrary_strings_never_raise(name: str) -> None:
    @given(st.text())
    def check(text: str) -> None:
        _check(_run(name, text))

    check()


@pytest.mark.parametrize("name", REGISTRY.registered_tools)
def test_arbitrary_json_values_never_raise(name: str) -> None:
    keys = _tool_keys(name)
    objects = st.fixed_dictionaries({}, optional={k: json_values for k in keys})

    @given(json_values | objects)
    def check(value: Any) -> None:
        _check(_run(name, json.dumps(value)))

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
    _check(_run("agent_calculator", json.dumps({"expression": expression})))
