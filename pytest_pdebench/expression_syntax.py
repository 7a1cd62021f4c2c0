"""The whitelist of the math expressions in case records, without sympy.

Case records carry expressions such as ``"sin(pi*x)*exp(-t)"``. They come from files anyone
can contribute, so they are never handed to ``eval`` (which sympy's own ``sympify`` uses
underneath): the string is parsed by Python's ``ast`` module and only the node types, names
and functions listed here are accepted; expressions.py turns an accepted tree into sympy.
Loading a case file checks every expression this way, before any run and without importing
sympy (a collection of the suite checks some 200,000 nodes).
"""

from __future__ import annotations

import ast

COORDINATE_NAMES = ("x", "y", "z", "t")
CONSTANT_NAMES = ("pi", "e", "E")
# the unknown itself, allowed only where a record asks for a function of it (reaction terms)
UNKNOWN_NAMES = ("u",)
FUNCTION_NAMES = frozenset(
    {
        *("sin", "cos", "tan", "exp", "log", "sqrt", "sinh", "cosh", "tanh"),
        *("atan", "asin", "acos", "atan2", "Abs", "sign", "Max", "Min"),
        *("abs", "max", "min", "arctan", "arctan2"),  # numpy's spellings
    }
)
BINARY_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
SIGNS = (ast.USub, ast.UAdd)
MAX_EXPRESSION_LENGTH = 20_000

Number = int | float
ExpressionLike = str | Number

_NAMES = frozenset(COORDINATE_NAMES + CONSTANT_NAMES)


class ExpressionError(ValueError):
    """An expression in a case record that is not a valid, safe math expression."""


def syntax_tree(source: ExpressionLike) -> ast.Expression | None:
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


def check_expression(source: ExpressionLike, allow: tuple[str, ...] = ()) -> ast.Expression | None:
    """The checked tree of ``source`` (None for a number); raises ExpressionError with what
    is wrong and where. ``allow`` names the unknowns a field may use (``("u",)``)."""
    tree = syntax_tree(source)
    if tree is not None and not _accepted(tree, allow):
        _refuse(tree.body, source, allow)
    return tree


def _accepted(tree: ast.Expression, allow: tuple[str, ...]) -> bool:
    """Whether every node of ``tree`` is whitelisted: one pass with a stack, only into the
    children a whitelisted node has (over the suite: 0.3-0.5 s, the recursion took 1.2 s)."""
    names = _NAMES.union(allow) if allow else _NAMES
    stack: list[ast.expr] = [tree.body]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, BINARY_OPERATORS):
                return False
            stack += (node.left, node.right)
        elif isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):  # not bool, complex or str
                return False
        elif isinstance(node, ast.Name):
            if node.id not in names:
                return False
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, SIGNS):
                return False
            stack.append(node.operand)
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTION_NAMES or node.keywords:
                return False
            stack += node.args
        else:
            return False
    return True


def _refuse(node: ast.expr, source: ExpressionLike, allow: tuple[str, ...]) -> None:
    """Raise the error of the first node, left to right, that the whitelist refuses."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return
    if isinstance(node, ast.Name):
        if node.id in _NAMES or node.id in allow:
            return
        names = ", ".join(["x", "y", "z", "t", "pi", "e", *allow])
        raise ExpressionError(f"unknown name {node.id!r} in {source!r} (allowed: {names})")
    if isinstance(node, ast.BinOp) and isinstance(node.op, BINARY_OPERATORS):
        _refuse(node.left, source, allow)
        _refuse(node.right, source, allow)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, SIGNS):
        _refuse(node.operand, source, allow)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id not in FUNCTION_NAMES:
            raise ExpressionError(
                f"unknown function {node.func.id!r} in {source!r} (allowed: {', '.join(sorted(FUNCTION_NAMES))})"
            )
        for argument in node.args:
            _refuse(argument, source, allow)
        return
    raise ExpressionError(f"unsupported syntax {type(node).__name__} in {source!r}")
