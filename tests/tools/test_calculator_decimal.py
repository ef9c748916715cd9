"""The calculator against Python's ``decimal`` module: literals exact, limits refused clearly."""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, DecimalException, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.calculator import (
    CONTEXT,
    MAX_EXPONENT,
    PRECISION,
    CalculationError,
    CalculatorTool,
    evaluate,
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("12345678901234567890.5-12345678901234567890", Decimal("0.5")),
        ("1.00000000000000001-1", Decimal("1E-17")),
        ("0.1+0.2", Decimal("0.3")),
        ("1_000.5*2", Decimal("2001.0")),
        ("1e-50*1e-55", Decimal("1E-105")),
    ],
)
def test_literals_are_read_as_decimals_not_floats(expression: str, expected: Decimal) -> None:
    assert evaluate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0.5**10000", "The result is too small to represent (closer to zero than 1E-100)."),
        ("1e999999", "The number 1e999999 is too large (the limit is 1E+99)."),
        ("1.5e99999", "The number 1.5e99999 is too large (the limit is 1E+99)."),
        ("1e-999999 + 1", "The number 1e-999999 is too small (the limit is 1E-100)."),
        ("-" * 999 + "1", "The expression nests operators more than 200 deep."),
        ("1" * 35, f"has more than {PRECISION} significant digits."),
    ],
)
def test_limits_are_refused_with_a_clear_reason(expression: str, message: str) -> None:
    with pytest.raises(CalculationError) as raised:
        evaluate(expression)
    assert message in str(raised.value)


async def test_the_tool_keeps_its_wire_strings(context: AgentToolExecutionContext) -> None:
    tool = CalculatorTool(RecordingLogger())
    done = await tool.execute(json.dumps({"expression": "1.00000000000000001-1"}), context)
    payload = json.loads(done.result or "")
    assert payload["result"] == 1e-17
    assert payload["resultText"] == "0.00000000000000001"
    refused = await tool.execute(json.dumps({"expression": "1e999999"}), context)
    assert refused.error_message == "The number 1e999999 is too large (the limit is 1E+99)."


# --- generated expressions, checked against a reference built on the decimal module ---


@dataclass(frozen=True)
class _Expr:
    text: str
    kind: str  # "num", "neg", "pos" or an operator
    parts: tuple[_Expr, ...] = ()

    def __repr__(self) -> str:
        return self.text


_literals = st.one_of(
    st.integers(0, 10**40).map(str),
    st.decimals(allow_nan=False, allow_infinity=False).map(lambda d: str(d.copy_abs())),
    st.builds(
        lambda m, f, e: f"{m}.{f}e{e}",
        st.integers(0, 999),
        st.integers(0, 99999),
        st.integers(-120, 120),
    ),
).map(lambda text: _Expr(text, "num"))

_OPS = ("+", "-", "*", "/", "//", "%", "**")


def _extend(children: st.SearchStrategy[_Expr]) -> st.SearchStrategy[_Expr]:
    unary = st.builds(
        lambda sign, e: _Expr(f"({sign}{e.text})", "neg" if sign == "-" else "pos", (e,)),
        st.sampled_from("-+"),
        children,
    )
    binary = st.builds(
        lambda op, a, b: _Expr(f"({a.text} {op} {b.text})", op, (a, b)),
        st.sampled_from(_OPS),
        children,
        children,
    )
    return unary | binary


_expressions = st.recursive(_literals, _extend, max_leaves=12)


class _Refused(Exception):
    pass


def _reference(e: _Expr) -> Decimal:
    """Python's decimal module with the calculator's context and Python's // and % rules."""
    if e.kind == "num":
        exact = Decimal(e.text)
        significant = "".join(map(str, exact.as_tuple().digits)).strip("0")
        if len(significant) > PRECISION:
            raise _Refused
        if not exact.is_zero() and not CONTEXT.Emin <= exact.adjusted() <= CONTEXT.Emax:
            raise _Refused
        return +exact
    values = [_reference(p) for p in e.parts]
    if e.kind == "neg":
        return -values[0]
    if e.kind == "pos":
        return +values[0]
    a, b = values
    if e.kind in ("/", "//", "%") and b.is_zero():
        raise _Refused
    if e.kind == "+":
        return a + b
    if e.kind == "-":
        return a - b
    if e.kind == "*":
        return a * b
    if e.kind == "/":
        return a / b
    if e.kind in ("//", "%"):
        floor = (a / b).to_integral_value(rounding=ROUND_FLOOR)
        return floor if e.kind == "//" else a - b * floor
    if abs(b) > MAX_EXPONENT or (a.is_zero() and b < 0):
        raise _Refused
    return a**b


@settings(max_examples=10_000 if os.environ.get("APTIX_CI") else 500)
@given(_expressions)
def test_agrees_with_the_decimal_module_or_refuses_clearly(expression: _Expr) -> None:
    assert ast.dump(ast.parse(expression.text, mode="eval"))  # the text is valid Python
    try:
        with localcontext(CONTEXT):
            expected: Decimal | None = _reference(expression)
    except (_Refused, DecimalException):
        expected = None
    try:
        got: Decimal | None = evaluate(expression.text)
    except CalculationError as exc:
        message = str(exc)
        assert "\n" not in message
        assert "unexpectedly" not in message
        got = None
    assert got == expected, expression.text
