"""Safe parsing of the math expressions found in case records.

Case records carry expressions such as ``"sin(pi*x)*exp(-t)"``. They come from
files anyone can contribute, so they are never handed to ``eval`` (which sympy's
own ``sympify``/``parse_expr`` use underneath). Instead the string is parsed by
Python's ``ast`` module and only a whitelist of node types, names and functions
is turned into a sympy expression. Evaluation on arrays goes through
``sympy.lambdify`` on that trusted tree.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence
from typing import cast

import numpy as np
import sympy as sp

x, y, z, t = sp.symbols("x y z t", real=True)
COORDINATES = {"x": x, "y": y, "z": z, "t": t}
# the unknown itself, allowed only where a record asks for a function of it (reaction terms)
u = sp.Symbol("u", real=True)
UNKNOWNS = {"u": u}

CONSTANTS = {"pi": sp.pi, "e": sp.E, "E": sp.E}

FUNCTIONS = {
    name: getattr(sp, name)
    for name in (
        "sin",
        "cos",
        "tan",
        "exp",
        "log",
        "sqrt",
        "sinh",
        "cosh",
        "tanh",
        "atan",
        "asin",
        "acos",
        "atan2",
        "Abs",
        "sign",
        "Max",
        "Min",
    )
}
FUNCTIONS["abs"] = sp.Abs
FUNCTIONS["max"] = sp.Max
FUNCTIONS["min"] = sp.Min
FUNCTIONS["arctan"] = sp.atan
FUNCTIONS["arctan2"] = sp.atan2

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}

MAX_EXPRESSION_LENGTH = 20_000

Number = int | float
ExpressionLike = str | Number


class ExpressionError(ValueError):
    """An expression in a case record that is not a valid, safe math expression."""


def _convert(node: ast.AST, source: ExpressionLike, allow: tuple[str, ...] = (), build: bool = True) -> sp.Expr | None:
    """The sympy expression of a parsed tree, after the whitelist; ``build=False`` only
    checks the whitelist (cheap: building sympy trees of long boundary data is not)."""
    if isinstance(node, ast.Expression):
        return _convert(node.body, source, allow, build)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        # floats stay floats: 0.5 must not become the rational 1/2 silently, but
        # the value is exact either way for evaluation in float64
        if not build:
            return None
        return sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(repr(node.value))
    if isinstance(node, ast.Name):
        if node.id in COORDINATES:
            return COORDINATES[node.id]
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        if node.id in allow:
            return UNKNOWNS[node.id]
        names = ", ".join(["x", "y", "z", "t", "pi", "e", *allow])
        raise ExpressionError(f"unknown name {node.id!r} in {source!r} (allowed: {names})")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _convert(node.left, source, allow, build), _convert(node.right, source, allow, build)
        return _BINARY[type(node.op)](left, right) if build else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _convert(node.operand, source, allow, build)
        if not build:
            return None
        return -cast("sp.Expr", operand) if isinstance(node.op, ast.USub) else operand  # built: not None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        function = FUNCTIONS.get(node.func.id)
        if function is None:
            raise ExpressionError(
                f"unknown function {node.func.id!r} in {source!r} (allowed: {', '.join(sorted(FUNCTIONS))})"
            )
        arguments = [_convert(arg, source, allow, build) for arg in node.args]
        return function(*arguments) if build else None
    raise ExpressionError(f"unsupported syntax {type(node).__name__} in {source!r}")


def _syntax_tree(source: ExpressionLike) -> ast.Expression | None:
    """The ast of an expression string (None for a number); raises ExpressionError."""
    if isinstance(source, bool):
        raise ExpressionError(f"a boolean is not an expression: {source!r}")
    if isinstance(source, (int, float)):
        return None
    if not isinstance(source, str):
        raise ExpressionError(f"expected an expression string or a number, got {type(source).__name__}")
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError(f"expression longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        return ast.parse(source.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"cannot parse {source!r}: {exc.msg}") from None


@functools.lru_cache(maxsize=4096, typed=True)  # typed: True must not hit the cache entry of 1
def parse_expression(source: ExpressionLike, allow: tuple[str, ...] = ()) -> sp.Expr:
    """Turn a record's expression (string or number) into a sympy expression.

    ``allow`` names extra symbols (only ``"u"``, the unknown) a field may use.
    """
    tree = _syntax_tree(source)
    if tree is None:
        return sp.Float(repr(source)) if isinstance(source, float) else sp.Integer(source)
    return _convert(tree, source, allow)


_NAMES = frozenset({*COORDINATES, *CONSTANTS})
_SIGNS = (ast.USub, ast.UAdd)


def _whitelisted(tree: ast.Expression, allow: tuple[str, ...]) -> bool:
    """Whether ``_convert`` accepts ``tree``: the same whitelist, walked with a stack and only
    into the children ``_convert`` reads (loading the suite checks some 200,000 nodes; the
    recursion took 1.2 s of it, ``ast.walk`` most of a second)."""
    names = _NAMES.union(allow) if allow else _NAMES
    stack: list[ast.expr] = [tree.body]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                return False
            stack += (node.left, node.right)
        elif isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):  # not bool, complex or str
                return False
        elif isinstance(node, ast.Name):
            if node.id not in names:
                return False
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, _SIGNS):
                return False
            stack.append(node.operand)
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                return False
            stack += node.args
        else:
            return False
    return True


def check_expression(source: ExpressionLike, allow: tuple[str, ...] = ()) -> None:
    """Raise ExpressionError unless ``source`` passes parse_expression's whitelist; builds
    no sympy tree (loading a suite checks every record's expressions this way). A tree the
    flat pass refuses goes through ``_convert``, which says what is wrong and where."""
    tree = _syntax_tree(source)
    if tree is not None and not _whitelisted(tree, allow):
        _convert(tree, source, allow, build=False)


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
