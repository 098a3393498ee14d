"""The calculator's arithmetic: exact, without eval, and with a budget checked before each
step (docs/design.md §27).

Big-integer maths holds the interpreter's lock for as long as it runs: one `10**10**7`
freezes every socket, turn and `/healthz` of the process. So no integer may grow past
RESULT_MAX_DIGITS, and the size of a product or a power is worked out from its operands'
bit lengths before it is computed; floats are bounded by themselves (an overflow or an
infinity is refused). Every step then costs microseconds, and an expression at most
EXPRESSION_MAX_CHARS long has few steps.
"""

from __future__ import annotations

import ast
import math
import operator

# Python prints at most 4300 digits of an integer (sys.int_info.default_max_str_digits).
RESULT_MAX_DIGITS = 4000
_MAX_BITS = int(RESULT_MAX_DIGITS / math.log10(2))
EXPRESSION_MAX_CHARS = 2000

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
FLOAT_RANGE = "the result is out of a floating-point number's range"
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class ResultTooLarge(ValueError):
    def __init__(self):
        super().__init__(
            f"the result would have more than {RESULT_MAX_DIGITS:,} digits (the calculator's limit)"
        )


def _bits_before(op: ast.operator, left: int | float, right: int | float) -> float:
    """The bits of `left op right` for two integers, worked out from logarithms (which
    Python takes of an integer of any size without converting it); 0 when the result is a
    float or no larger than its operands. The result is checked exactly afterwards."""
    if not (isinstance(left, int) and isinstance(right, int)) or not (left and right):
        return 0
    if isinstance(op, ast.Mult):
        return math.log2(abs(left)) + math.log2(abs(right))
    if isinstance(op, ast.Pow) and right > 0 and abs(left) > 1:
        return math.log2(abs(left)) * min(right, _MAX_BITS + 1)
    return 0


def _checked(value):
    if isinstance(value, complex):
        raise ValueError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(FLOAT_RANGE)
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        raise ResultTooLarge()
    return value


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in {int, float}:
        return _checked(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        bits = _bits_before(node.op, left, right)
        if bits > _MAX_BITS:
            raise ResultTooLarge()
        try:
            return _checked(_BINARY[type(node.op)](left, right))
        except OverflowError as error:
            raise ValueError(FLOAT_RANGE) from error
    raise ValueError("only numbers and + - * / // % ** ( ) are allowed")


def calculate(expression: str) -> str:
    """The value of an arithmetic expression, as text; ValueError saying why it has none."""
    if len(expression) > EXPRESSION_MAX_CHARS:
        raise ValueError(f"the expression is longer than {EXPRESSION_MAX_CHARS} characters")
    text = expression.replace("^", "**").replace("×", "*").replace("÷", "/")
    try:
        value = _evaluate(ast.parse(text, mode="eval"))
    except (SyntaxError, ValueError) as error:
        if isinstance(error, SyntaxError) or not str(error):
            raise ValueError(f"not an arithmetic expression: {expression[:200]!r}") from error
        raise
    except ZeroDivisionError as error:
        raise ValueError("division by zero") from error
    except (RecursionError, MemoryError) as error:
        raise ValueError("the expression is nested too deeply") from error
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    elif isinstance(value, float):
        value = round(value, 10)
    return str(value)
