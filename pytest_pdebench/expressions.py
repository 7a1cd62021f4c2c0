"""The math expressions of case records as sympy expressions, and their values on points.

A record's expression is checked against the whitelist of expression_syntax.py (never
``eval``, which sympy's own ``sympify`` uses underneath) and only then built into a sympy
tree; evaluation on arrays goes through ``sympy.lambdify`` on that trusted tree.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence

import numpy as np
import sympy as sp

from .expression_syntax import (  # noqa: F401 - the checks' names, for the modules that build
    FUNCTION_NAMES,
    MAX_EXPRESSION_LENGTH,
    ExpressionError,
    ExpressionLike,
    Number,
    check_expression,
)

x, y, z, t = sp.symbols("x y z t", real=True)
COORDINATES = {"x": x, "y": y, "z": z, "t": t}
u = sp.Symbol("u", real=True)
UNKNOWNS = {"u": u}

CONSTANTS = {"pi": sp.pi, "e": sp.E, "E": sp.E}

_SPELLINGS = {"abs": "Abs", "max": "Max", "min": "Min", "arctan": "atan", "arctan2": "atan2"}
FUNCTIONS = {name: getattr(sp, _SPELLINGS.get(name, name)) for name in FUNCTION_NAMES}

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}


def _build(node: ast.expr) -> sp.Expr:
    """The sympy expression of a tree check_expression accepted."""
    if isinstance(node, ast.Constant):
        # floats stay floats: 0.5 must not become the rational 1/2 silently, but
        # the value is exact either way for evaluation in float64
        return sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(repr(node.value))
    if isinstance(node, ast.Name):
        for names in (COORDINATES, CONSTANTS, UNKNOWNS):
            if node.id in names:
                return names[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_build(node.left), _build(node.right))
    if isinstance(node, ast.UnaryOp):
        operand = _build(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return FUNCTIONS[node.func.id](*(_build(argument) for argument in node.args))
    raise ExpressionError(f"unsupported syntax {type(node).__name__}")  # not reached: the tree was checked


@functools.lru_cache(maxsize=4096, typed=True)  # typed: True must not hit the cache entry of 1
def parse_expression(source: ExpressionLike, allow: tuple[str, ...] = ()) -> sp.Expr:
    """Turn a record's expression (string or number) into a sympy expression.

    ``allow`` names extra symbols (only ``"u"``, the unknown) a field may use.
    """
    tree = check_expression(source, allow)
    if tree is None:
        return sp.Float(repr(source)) if isinstance(source, float) else sp.Integer(source)
    return _build(tree.body)


def expression_to_string(expr: sp.Expr) -> str:
    """The canonical record form of a sympy expression (parseable by parse_expression)."""
    return sp.sstr(expr, full_prec=False)


@functools.lru_cache(maxsize=1024, typed=True)
def _numpy_function(source: ExpressionLike):
    expr = parse_expression(source)
    return sp.lambdify((x, y, z, t), expr, modules="numpy")


def evaluate(source: ExpressionLike, points: np.ndarray, time: float = 0.0) -> np.ndarray:
    """Evaluate an expression at points of shape (N, dim) (dim 1..3), at time ``time``."""
    points = np.asarray(points, dtype=float)
    coords = [points[:, i] if i < points.shape[1] else np.zeros(len(points)) for i in range(3)]
    value = _numpy_function(source)(*coords, float(time))
    return np.broadcast_to(np.asarray(value, dtype=float), (len(points),)).copy()


def evaluate_vector(sources: Sequence[ExpressionLike], points: np.ndarray, time: float = 0.0) -> np.ndarray:
    """Evaluate a vector of expressions: result shape (N, len(sources))."""
    return np.stack([evaluate(s, points, time) for s in sources], axis=1)
