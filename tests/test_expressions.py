import ast
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_pdebench.expression_syntax import _accepted, _refuse
from pytest_pdebench.expressions import ExpressionError, check_expression, evaluate, evaluate_vector, parse_expression


def test_values_match_numpy():
    points = np.array([[0.25, 0.5], [0.1, 0.9]])
    values = evaluate("sin(pi*x)*exp(-t) + y^2", points, time=0.3)
    expected = np.sin(np.pi * points[:, 0]) * np.exp(-0.3) + points[:, 1] ** 2
    np.testing.assert_allclose(values, expected, rtol=1e-14)


def test_constants_and_numbers_broadcast():
    points = np.zeros((4, 3))
    np.testing.assert_allclose(evaluate(2.5, points), 2.5)
    np.testing.assert_allclose(evaluate("pi", points), math.pi)


def test_vector_expressions_stack_components():
    points = np.array([[1.0, 2.0]])
    np.testing.assert_allclose(evaluate_vector(["x", "x*y", "1"], points), [[1.0, 2.0, 1.0]])


def test_three_dimensional_points():
    points = np.array([[0.5, 0.5, 0.5]])
    np.testing.assert_allclose(evaluate("x + y + z", points), [1.5])


@pytest.mark.parametrize("source", [
    "__import__('os').system('true')",  # a call of an unknown name
    "x.__class__",  # attribute access
    "(lambda: 1)()",
    "[1, 2]",
    "open('/etc/passwd')",
    "sin(x, **{})",
    "u + 1",  # unknown symbol
    "x if y else 1",
    "True",
])
def test_unsafe_or_unknown_syntax_is_rejected(source):
    with pytest.raises(ExpressionError) as parsed:
        parse_expression(source)
    # loading a case file checks without building sympy trees: the same verdict, the same words
    with pytest.raises(ExpressionError) as checked:
        check_expression(source)
    assert str(checked.value) == str(parsed.value)


def test_the_cheap_check_accepts_what_parses():
    for source in ("sin(pi*x)*exp(-t)", "x^2 + atan2(y, x)", "-3.5", 2, "max(x, 0.5*y)"):
        check_expression(source)
        parse_expression(source)
    check_expression("u**2 - u", allow=("u",))


def test_syntax_error_names_the_expression():
    with pytest.raises(ExpressionError, match=r"cannot parse 'sin\(x'"):
        parse_expression("sin(x")


def test_booleans_are_not_expressions():
    with pytest.raises(ExpressionError):
        parse_expression(True)


# pieces of expressions, most allowed, some not: names, calls, operators, containers, attributes
PIECES = ["x", "y", "t", "u", "pi", "e", "2", "0.5", "1e-3", "True", "1j", "'s'", "sin(", "atan2(", "max(",
          "foo(", "sin", "(", ")", ",", "+", "-", "*", "/", "**", "^", "%", "//", "<", " if ", " else ", "[",
          "]", ".real", "*x", "**x", "x=1", "lambda: ", "not ", "~"]


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=12), st.sampled_from([(), ("u",)]))
def test_the_flat_whitelist_accepts_what_the_recursive_one_does(pieces, allow):
    """The whitelist's one pass over the tree (what a load of the suite runs) agrees with its
    recursive walk (what says where an expression is refused) on every string that parses."""
    source = "".join(pieces)
    try:
        with warnings.catch_warnings():  # "2if": Python warns of the literal, then parses it
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source.replace("^", "**"), mode="eval")
    except SyntaxError:
        return
    try:
        _refuse(tree.body, source, allow)
        accepted = True
    except ExpressionError:
        accepted = False
    assert _accepted(tree, allow) == accepted, source
