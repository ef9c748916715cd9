"""``agent_calculator``: exact decimal arithmetic on an expression string, without ``eval``."""

from __future__ import annotations

import ast
import decimal
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from pydantic import Field

from aptix.results import InvokeResult
from aptix.tools.args import ToolArgs
from aptix.tools.builtin.base import BuiltinTool, CallResult, Refusal, hints
from aptix.tools.context import AgentToolExecutionContext

__all__ = ["CONTEXT", "CalculationError", "CalculatorTool", "evaluate"]

MAX_EXPRESSION_LENGTH = 1_000
MAX_NESTING = 100
MAX_DEPTH = 200
MAX_EXPONENT = 10_000
MAX_DIGITS = 100
PRECISION = 34

# Decimal arithmetic keeps 0.1 + 0.2 == 0.3; Emax and Emin bound every intermediate value,
# and trapping Underflow makes a result too small to hold an error instead of a silent 0.
CONTEXT = decimal.Context(
    prec=PRECISION,
    Emax=MAX_DIGITS - 1,
    Emin=-MAX_DIGITS,
    traps=[decimal.Overflow, decimal.Underflow, decimal.InvalidOperation, decimal.DivisionByZero],
)
_SYMBOLS = str.maketrans({"×": "*", "÷": "/", "−": "-", "^": "**", "–": "-"})


class CalculationError(ValueError):
    """The expression cannot be evaluated; the message says why."""


class _Args(ToolArgs):
    expression: str | None = Field(
        None,
        description="Arithmetic expression, e.g. '2*(3+4)' or '-1.5 ** 2 // 3'.",
    )


class _Result(CallResult):
    expression: str
    result: int | float
    result_text: str


class CalculatorTool(BuiltinTool[_Args, _Result]):
    """Evaluates arithmetic safely: + - * / // % **, parentheses, unary minus and decimals."""

    TOOL_NAME = "agent_calculator"
    TOOL_USAGE_METADATA = (
        "Call this tool whenever the user needs an exact arithmetic result instead of "
        "computing it yourself. Supports + - * / // % ** (also × ÷ ^), parentheses, unary "
        "minus and decimal numbers. Pass the whole expression as one string."
    )
    TOOL_ANNOTATIONS = hints("Calculator", read_only=True, idempotent=True)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        description = "Evaluates an arithmetic expression exactly and returns the numeric result."
        return cls.function_schema(description, required=("expression",))

    async def run(self, args: _Args, context: AgentToolExecutionContext) -> _Result | Refusal:
        """Evaluate the expression."""
        expression = (args.expression or "").strip()
        if not expression:
            return InvokeResult.from_error(
                "CalculatorTool requires a non-empty 'expression' string."
            )
        try:
            value = evaluate(expression)
        except CalculationError as exc:
            return InvokeResult.from_error(str(exc))
        return _Result(
            expression=expression,
            result=_as_json_number(value),
            result_text=_as_text(value),
        )


def evaluate(expression: str) -> Decimal:
    """Evaluate ``expression`` or raise :class:`CalculationError` with a readable reason."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CalculationError(
            f"The expression is too long ({len(expression)} characters; "
            f"the limit is {MAX_EXPRESSION_LENGTH})."
        )
    text = expression.translate(_SYMBOLS)
    if _nesting(text) > MAX_NESTING:
        raise CalculationError(f"The expression nests parentheses more than {MAX_NESTING} deep.")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        where = f" at position {exc.offset}" if exc.offset else ""
        raise CalculationError(f"Could not parse '{expression}': invalid syntax{where}.") from None
    except (ValueError, MemoryError, RecursionError):
        raise CalculationError(f"Could not parse '{expression}'.") from None
    if _depth(tree.body) > MAX_DEPTH:
        raise CalculationError(f"The expression nests operators more than {MAX_DEPTH} deep.")
    try:
        return _Evaluator(text).eval(tree.body)
    except decimal.Overflow:
        raise CalculationError(
            f"The result is too large (more than {MAX_DIGITS} digits)."
        ) from None
    except decimal.Underflow:
        raise CalculationError(
            f"The result is too small to represent (closer to zero than 1E-{MAX_DIGITS})."
        ) from None
    except decimal.DivisionByZero:
        raise CalculationError("Division by zero is not defined.") from None
    except decimal.InvalidOperation:
        raise CalculationError(
            "The expression has no real-number result (e.g. 0/0 or a root of a negative)."
        ) from None


def _nesting(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def _depth(root: ast.expr) -> int:
    # Iterative, so a deep tree is measured without the recursion it would cause.
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


class _Evaluator:
    """Evaluates a parsed expression; literals are read from the source text, never floats."""

    def __init__(self, text: str) -> None:
        self._text = text

    def eval(self, node: ast.expr) -> Decimal:
        match node:
            case ast.Constant(value=bool()):
                raise CalculationError("Booleans are not numbers here.")
            case ast.Constant(value=int() | float()):
                return self._literal(node)
            case ast.UnaryOp(op=ast.USub(), operand=operand):
                return CONTEXT.minus(self.eval(operand))
            case ast.UnaryOp(op=ast.UAdd(), operand=operand):
                return CONTEXT.plus(self.eval(operand))
            case ast.BinOp(left=left, op=op, right=right):
                return _binary(op, self.eval(left), self.eval(right))
            case ast.Name(id=name):
                raise CalculationError(
                    f"Unknown name '{name}': only numbers and operators are allowed."
                )
            case _:
                raise CalculationError(
                    f"Unsupported element in expression: {type(node).__name__}. "
                    "Only numbers, + - * / // % ** and parentheses are allowed."
                )

    def _literal(self, node: ast.Constant) -> Decimal:
        source = ast.get_source_segment(self._text, node) or ""
        # A float constant has already lost digits; its source text has not.
        exact = Decimal(node.value) if isinstance(node.value, int) else Decimal(source)
        digits = exact.as_tuple().digits
        significant = len("".join(map(str, digits)).strip("0"))
        if significant > PRECISION:
            raise CalculationError(
                f"The number {source} has more than {PRECISION} significant digits."
            )
        if exact.is_zero():
            return CONTEXT.create_decimal(0)
        if exact.adjusted() > CONTEXT.Emax:
            raise CalculationError(
                f"The number {source} is too large (the limit is 1E+{MAX_DIGITS - 1})."
            )
        if exact.adjusted() < CONTEXT.Emin:
            raise CalculationError(
                f"The number {source} is too small (the limit is 1E-{MAX_DIGITS})."
            )
        return CONTEXT.create_decimal(exact)


def _binary(op: ast.operator, a: Decimal, b: Decimal) -> Decimal:
    c = CONTEXT
    match op:
        case ast.Add():
            return c.add(a, b)
        case ast.Sub():
            return c.subtract(a, b)
        case ast.Mult():
            return c.multiply(a, b)
        case ast.Div() | ast.FloorDiv() | ast.Mod() if b.is_zero():
            raise CalculationError("Division by zero is not defined.")
        case ast.Div():
            return c.divide(a, b)
        case ast.FloorDiv():
            return _floor_div(a, b)
        case ast.Mod():
            return c.subtract(a, c.multiply(b, _floor_div(a, b)))
        case ast.Pow():
            if abs(b) > MAX_EXPONENT:
                raise CalculationError(
                    f"The exponent {b} is too large (the limit is ±{MAX_EXPONENT})."
                )
            if a.is_zero() and b < 0:
                raise CalculationError("Division by zero is not defined.")
            return c.power(a, b)
        case _:
            raise CalculationError(
                f"Unsupported operator {type(op).__name__}: use + - * / // % **."
            )


def _floor_div(a: Decimal, b: Decimal) -> Decimal:
    # Python semantics: round toward negative infinity, unlike Decimal's truncation.
    return CONTEXT.divide(a, b).to_integral_value(rounding=ROUND_FLOOR)


def _as_json_number(value: Decimal) -> int | float:
    if value == value.to_integral_value():
        return int(value)
    return float(value)


def _as_text(value: Decimal) -> str:
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(CONTEXT), "f")
