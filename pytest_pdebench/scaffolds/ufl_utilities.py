UFL_NAMES = {"sin": ufl.sin, "cos": ufl.cos, "tan": ufl.tan, "exp": ufl.exp, "log": ufl.ln, "sqrt": ufl.sqrt,
             "sinh": ufl.sinh, "cosh": ufl.cosh, "tanh": ufl.tanh, "atan": ufl.atan, "atan2": ufl.atan2,
             "asin": ufl.asin, "acos": ufl.acos, "abs": abs, "Abs": abs, "pi": ufl.pi, "e": ufl.e}


def expression(text, msh, t=0.0, u=None):
    """A case_spec expression (string or number) as UFL on ``msh``; ``t`` may be a
    Constant, ``u`` the unknown (for reaction terms)."""
    coordinates = ufl.SpatialCoordinate(msh)
    names = dict(UFL_NAMES, x=coordinates[0], y=coordinates[1], t=t, u=u)
    if coordinates.ufl_shape[0] == 3:
        names["z"] = coordinates[2]
    return eval(str(text), {"__builtins__": {}}, names)  # the case's own data, in the sandbox
