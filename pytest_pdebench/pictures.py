"""An item's pictures (``fields.png`` in its audit folder): the submitted solution, the
reference and the pointwise error on the evaluation grid, one row per thing to see (a scalar;
a vector's magnitude, then each component), with the domain's outline and its boundary pieces
named by tag. 3-D: the z-slice where the error is largest. Drawn from the arrays the judge
already holds (the gated run's solution): nothing is run again.

Which items get them is ``--pde-pictures``: ``failed`` (the default: items with a solution that
did not pass), ``all`` or ``none``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .boundaries import boundary_pieces, boundary_points
from .domains import Geometry
from .grid import EvalGrid

PICTURES = ("failed", "all", "none")
FIELDS_FILE = "fields.png"
PANEL_INCHES = 3.2


def wanted(choice: str, outcome: str) -> bool:
    return choice == "all" or (choice == "failed" and outcome != "PASS")


def _rows(solution: np.ndarray, reference: np.ndarray, names: list[str]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, solution, reference) per row: a scalar as it is; a vector's magnitude first."""
    if len(names) == 1:
        return [(names[0], solution[..., 0], reference[..., 0])]
    magnitude = ("|" + ", ".join(names) + "|", np.linalg.norm(solution, axis=-1), np.linalg.norm(reference, axis=-1))
    return [magnitude, *[(name, solution[..., i], reference[..., i]) for i, name in enumerate(names)]]


def _outline(axes, geometry: Geometry, spacing: float, colour: str) -> None:
    """The true boundary, each tag's pieces drawn and its name written at its middle."""
    for tag in dict.fromkeys(piece.tag for piece in boundary_pieces(geometry)):
        points = boundary_points(geometry, tag, spacing=spacing / 2)
        if len(points) == 0:
            continue
        axes.plot(points[:, 0], points[:, 1], ".", color=colour, markersize=0.8)
        middle = points[len(points) // 2]
        axes.annotate(tag, middle, fontsize=7, color="black", ha="center", va="center",
                      bbox={"boxstyle": "round,pad=0.15", "fc": "white", "alpha": 0.7, "lw": 0})  # fmt: skip


def draw_fields(
    path: Path,
    solution: np.ndarray,
    reference: np.ndarray,
    valid: np.ndarray,
    grid: EvalGrid,
    geometry: Geometry,
    names: list[str],
    title: str,
) -> Path:
    """Write the picture of one item's fields to ``path`` (PNG) and return it."""
    import matplotlib

    matplotlib.use("Agg")  # no screen: a file only
    from matplotlib.figure import Figure

    where = ""
    pointwise = np.sqrt(np.sum((solution - reference) ** 2, axis=-1))
    if grid.dim == 3:  # the z-slice where the error is largest
        layer = int(np.argmax(np.max(np.where(valid, pointwise, -np.inf), axis=(1, 2))))
        solution, reference, valid = solution[layer], reference[layer], valid[layer]
        where = f" (slice z = {grid.axes[2][layer]:.3g})"
    rows = _rows(solution, reference, names)
    figure = Figure(figsize=(3 * PANEL_INCHES, len(rows) * PANEL_INCHES * 0.9), layout="constrained")
    figure.suptitle(title + where, fontsize=9)
    extent = (grid.axes[0][0], grid.axes[0][-1], grid.axes[1][0], grid.axes[1][-1])
    spacing = max(float(axis[1] - axis[0]) for axis in grid.axes[:2] if len(axis) > 1)
    panels = figure.subplots(len(rows), 3, squeeze=False)
    for (name, mine, theirs), (left, middle, right) in zip(rows, panels):
        shown = np.where(valid, mine, np.nan), np.where(valid, theirs, np.nan)
        low = float(np.nanmin([np.nanmin(shown[1]), np.nanmin(shown[0])]))
        high = float(np.nanmax([np.nanmax(shown[1]), np.nanmax(shown[0])]))
        error = np.where(valid, np.abs(mine - theirs), np.nan)
        for axes, values, label, colours, limits in (
            (left, shown[0], f"solution {name}", "viridis", (low, high)),
            (middle, shown[1], f"reference {name}", "viridis", (low, high)),
            (right, error, f"|error| {name} (max {np.nanmax(error):.2e})", "magma", (0.0, None)),
        ):  # the outline in black, white over the error's dark ground
            image = axes.imshow(values, origin="lower", extent=extent, cmap=colours, vmin=limits[0], vmax=limits[1])
            figure.colorbar(image, ax=axes, shrink=0.8)
            axes.set_title(label, fontsize=8)
            axes.tick_params(labelsize=6)
            if grid.dim == 2:
                _outline(axes, geometry, spacing, "white" if axes is right else "black")
    figure.savefig(path, dpi=90)
    return path
