"""Case expressions (strings such as "sin(pi*x)*exp(-t)") as UFL, for the oracles of
every UFL-based library. Parsed with ``ast`` under a whitelist, never eval'd."""

import ast
import math

import ufl

FUNCTIONS = {
    "sin": ufl.sin, "cos": ufl.cos, "tan": ufl.tan, "exp": ufl.exp, "log": ufl.ln, "sqrt": ufl.sqrt,
    "sinh": ufl.sinh, "cosh": ufl.cosh, "tanh": ufl.tanh, "atan": ufl.atan, "asin": ufl.asin, "acos": ufl.acos,
    "abs": abs, "Abs": abs, "atan2": ufl.atan2,
}
OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
             ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b}


def expression_to_ufl(expression, coordinates, constant, t=None, u=None):
    """``coordinates``: ufl.SpatialCoordinate of the mesh; ``constant(value)``: the
    library's Constant for plain numbers; ``t`` a Constant for time-dependent data;
    ``u`` the unknown in reaction terms."""
    names = {"x": coordinates[0], "y": coordinates[1], "pi": math.pi, "e": math.e, "t": t, "u": u}
    if coordinates.ufl_shape[0] == 3:
        names["z"] = coordinates[2]

    def convert(node):
        if isinstance(node, ast.Expression):
            return convert(node.body)
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return names[node.id]
        if isinstance(node, ast.BinOp):
            return OPERATORS[type(node.op)](convert(node.left), convert(node.right))
        if isinstance(node, ast.UnaryOp):
            value = convert(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Call):
            return FUNCTIONS[node.func.id](*(convert(a) for a in node.args))
        raise ValueError(f"unsupported expression {expression!r}")

    value = convert(ast.parse(str(expression).replace("^", "**"), mode="eval"))
    return constant(value) if isinstance(value, float) else value
