from __future__ import annotations

import json

import pytest

from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.calculator import CalculationError, CalculatorTool, evaluate


async def _run(expression: str, context: AgentToolExecutionContext) -> dict[str, object]:
    outcome = await CalculatorTool(RecordingLogger()).execute(
        json.dumps({"expression": expression}), context
    )
    assert outcome.successful, outcome.error_message
    return dict(json.loads(outcome.result or ""))


@pytest.mark.parametrize(
    ("expression", "result", "text"),
    [
        ("2*(3+4)", 14, "14"),
        ("0.1 + 0.2", 0.3, "0.3"),
        ("-3 + 5", 2, "2"),
        ("-(2 + 3) * -2", 10, "10"),
        ("7 / 2", 3.5, "3.5"),
        ("7 // 2", 3, "3"),
        ("-7 // 2", -4, "-4"),
        ("-7 % 3", 2, "2"),
        ("7.5 % 2", 1.5, "1.5"),
        ("2 ** 10", 1024, "1024"),
        ("2 ^ 3", 8, "8"),
        ("6 × 7 ÷ 3 − 1", 13, "13"),
        ("2 ** -1", 0.5, "0.5"),
        ("4 ** 0.5", 2, "2"),
        ("((((1))))", 1, "1"),
        ("+5", 5, "5"),
        ("1e3 + 1", 1001, "1001"),
    ],
)
async def test_evaluates_arithmetic(
    context: AgentToolExecutionContext, expression: str, result: float, text: str
) -> None:
    payload = await _run(expression, context)
    assert payload["result"] == result
    assert payload["resultText"] == text
    assert payload["expression"] == expression
    assert payload["sessionId"] == context.session_id
    assert payload["conversationId"] == "conv-1"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1/0", "Division by zero is not defined."),
        ("5 // 0", "Division by zero is not defined."),
        ("5 % 0.0", "Division by zero is not defined."),
        ("0 ** -1", "Division by zero is not defined."),
        ("2 ** 100000", "The exponent 100000 is too large (the limit is ±10000)."),
        ("10 ** 200", "The result is too large (more than 100 digits)."),
        ("2 +* 3", "Could not parse '2 +* 3': invalid syntax"),
        ("(1 + 2", "Could not parse '(1 + 2': invalid syntax"),
        ("x + 1", "Unknown name 'x'"),
        ("__import__('os')", "Unsupported element in expression: Call"),
        ("[1, 2]", "Unsupported element in expression: List"),
        ("1 if 1 else 2", "Unsupported element in expression: IfExp"),
        ("3 & 1", "Unsupported operator BitAnd"),
        ("True + 1", "Booleans are not numbers here."),
        ("(-8) ** 0.5", "no real-number result"),
        ("(" * 150 + "1" + ")" * 150, "nests parentheses more than 100 deep"),
        ("1+" * 600 + "1", "too long"),
    ],
)
def test_rejects_with_a_clear_reason(expression: str, message: str) -> None:
    with pytest.raises(CalculationError) as raised:
        evaluate(expression)
    assert message in str(raised.value)


@pytest.mark.parametrize("args", ["{}", '{"expression": "  "}', ""])
async def test_missing_expression_is_a_validation_failure(
    context: AgentToolExecutionContext, args: str
) -> None:
    outcome = await CalculatorTool(RecordingLogger()).execute(args, context)
    assert not outcome.successful
    assert outcome.error_message == "CalculatorTool requires a non-empty 'expression' string."


async def test_calculation_errors_come_back_as_failed_results(
    context: AgentToolExecutionContext,
) -> None:
    outcome = await CalculatorTool(RecordingLogger()).execute('{"expression": "1/0"}', context)
    assert not outcome.successful
    assert outcome.error_message == "Division by zero is not defined."


async def test_unexpected_exception_is_logged_by_the_executor(
    context: AgentToolExecutionContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aptix import AgentToolExecutor, AgentToolRegistry
    from aptix.tools import AgentToolCall
    from aptix.tools.builtin import calculator

    def broken(expression: str) -> object:
        raise MemoryError("out of memory")

    monkeypatch.setattr(calculator, "evaluate", broken)
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(CalculatorTool)
    done = await AgentToolExecutor(registry, logger).execute(
        AgentToolCall("c", "agent_calculator", '{"expression": "1+1"}'), context
    )
    assert not done.was_executed
    assert "failed unexpectedly" in (done.error_message or "")
    assert logger.errors[0].tag == "[agent_calculator_ExecuteAsync__Exception]"
