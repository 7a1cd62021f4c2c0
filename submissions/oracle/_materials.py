"""Material laws shared by the oracles of every Python library."""


def lame(params):
    """(mu, lambda) from the case: given directly, or from E and nu (plane strain)."""
    if "mu" in params and "lambda" in params:
        return float(params["mu"]), float(params["lambda"])
    E, nu = float(params["E"]), float(params["nu"])
    return E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
