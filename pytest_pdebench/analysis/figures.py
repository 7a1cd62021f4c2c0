"""The report's figures (matplotlib, no display): each written as PNG and SVG; returns
the stems written. Numbers come from ``tables.py``'s functions, never recomputed here."""

from __future__ import annotations

from pathlib import Path

from ..thresholds import DEFAULT_ALPHA_ACC, DEFAULT_ALPHA_TIME, SENSITIVITY_ALPHA_ACC, SENSITIVITY_ALPHA_TIME
from . import tables

COLOURS = {"PASS": "#2e7d32", "F-Exec": "#9e9e9e", "F-Acc": "#c62828", "F-Time": "#f9a825"}

# what each figure shows, in a sentence: its caption in the report
CAPTIONS = {
    "stages": "Where the items stop: for each system and library, the share of items that passed or failed "
    "at the execution, accuracy or time gate.",
    "families": "Pass rate (%) of each system on each PDE family, one panel per library; a blank cell is a "
    "family the system ran no case of.",
    "sensitivity": "How the pass rate would move with the thresholds, re-gated from the stored numbers: left, "
    "the accuracy multiplier alpha_acc; right, the time multiplier alpha_time; the dotted line is the default.",
    "gates_scatter": "Each item with an error: its error over its accuracy threshold against its time over its "
    "time limit (log scales); right of 1 fails on accuracy, above 1 on time; crosses under the dotted line were "
    "not timed (the accuracy gate stopped them); items without an error are counted in the corner.",
    "attempts": "Pass rate after each attempt, for the systems that had more than one (each attempt saw the "
    "failure of the one before).",
    "cost": "Pass rate against the dollars spent on new model calls, one point per system and library "
    "(answers replayed from the cache cost nothing).",
}


def caption(stem: str) -> str:
    """The figure's caption: a sentence saying what it shows."""
    return CAPTIONS[stem]


def write_figures(rows: list[dict], folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, draw in (
        ("stages", _stages),
        ("families", _families),
        ("sensitivity", _sensitivity),
        ("gates_scatter", _scatter),
        ("attempts", _attempts),
        ("cost", _cost),
    ):
        figure = draw(rows)
        if figure is None:
            continue
        for suffix in ("png", "svg"):
            figure.savefig(folder / f"{stem}.{suffix}", dpi=120)
        import matplotlib.pyplot as plt

        plt.close(figure)
        written.append(stem)
    return written


def _groups(rows):
    return tables.grouped(rows, "system", "library")


def _stages(rows):
    import matplotlib.pyplot as plt

    groups = _groups(rows)
    labels = [f"{system} / {library}" for system, library in groups]
    figure, axes = plt.subplots(layout="constrained", figsize=(8, 0.5 * len(groups) + 1.5))
    left = [0.0] * len(groups)
    for outcome in tables.OUTCOMES:
        shares = [100 * sum(r["outcome"] == outcome for r in part) / len(part) for part in groups.values()]
        axes.barh(labels, shares, left=left, color=COLOURS[outcome], label=outcome)
        left = [a + b for a, b in zip(left, shares)]
    axes.set_xlabel("share of items (%)")
    axes.set_xlim(0, 100)
    axes.invert_yaxis()
    axes.legend(ncol=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return figure


def _families(rows):
    import matplotlib.pyplot as plt

    libraries = tables.grouped(rows, "library")
    figure, all_axes = plt.subplots(
        1, len(libraries), figsize=(4 + 2.5 * len(libraries), 5), squeeze=False, layout="constrained"
    )
    for axes, ((library,), part) in zip(all_axes[0], libraries.items()):
        systems = sorted({r["system"] for r in part})
        families = sorted({r["family"] for r in part})
        grid = []
        for family in families:
            line = []
            for system in systems:
                cell = [r for r in part if r["family"] == family and r["system"] == system]
                line.append(100 * tables.pass_rate(cell)["rate"] if cell else float("nan"))
            grid.append(line)
        image = axes.imshow(grid, vmin=0, vmax=100, cmap="RdYlGn", aspect="auto")
        axes.set_xticks(range(len(systems)), systems, rotation=30, ha="right")
        axes.set_yticks(range(len(families)), families)
        for i, line in enumerate(grid):
            for j, value in enumerate(line):
                if value == value:
                    axes.text(
                        j,
                        i,
                        f"{value:.0f}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if value < 15 or value > 85 else "black",
                    )  # legible on dark cells
        axes.set_title(library)
    figure.colorbar(image, ax=all_axes[0].tolist(), label="pass rate (%)")
    return figure


def _sensitivity(rows):
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for (system, library), part in _groups(rows).items():
        label = f"{system} / {library}"
        left.plot(
            SENSITIVITY_ALPHA_ACC,
            [100 * tables.sensitivity(part, a, DEFAULT_ALPHA_TIME)["rate"] for a in SENSITIVITY_ALPHA_ACC],
            marker="o",
            label=label,
        )
        right.plot(
            SENSITIVITY_ALPHA_TIME,
            [100 * tables.sensitivity(part, DEFAULT_ALPHA_ACC, a)["rate"] for a in SENSITIVITY_ALPHA_TIME],
            marker="o",
            label=label,
        )
    for axes, name, default in ((left, "alpha_acc", DEFAULT_ALPHA_ACC), (right, "alpha_time", DEFAULT_ALPHA_TIME)):
        axes.axvline(default, color="k", linestyle=":", linewidth=1)
        axes.set_xlabel(f"{name} (dotted: default)")
        axes.set_ylabel("pass rate (%)")
        axes.set_ylim(0, 100)
    left.set_xscale("log")
    left.legend(fontsize=8)
    return figure


SCATTER_FLOOR = 1e-4  # an error or time ratio under this (an exact solution's 0) is drawn at it


def _scatter(rows):
    """Every item with an error: timed ones at (error / tau_acc, t_agent / tau_time), those the
    accuracy gate stopped before timing on a "not timed" line under them; the items without an
    error (F-Exec) are counted in the corner."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(layout="constrained", figsize=(6.5, 5))
    judged = [r for r in rows if r["error"] is not None and r["tau_acc"]]
    timed = [r for r in judged if r["t_agent"] and r["tau_time"]]
    timed_ids = {id(r) for r in timed}
    if not judged:
        plt.close(figure)
        return None
    times = [max(r["t_agent"] / r["tau_time"], SCATTER_FLOOR) for r in timed]
    untimed_at = min([*times, 0.1]) / 3  # a line under every timed point
    for index, ((system, library), part) in enumerate(_groups(judged).items()):
        colour = f"C{index % 10}"
        points = [(max(r["error"] / r["tau_acc"], SCATTER_FLOOR), r) for r in part]
        mine = [(x, max(r["t_agent"] / r["tau_time"], SCATTER_FLOOR)) for x, r in points if id(r) in timed_ids]
        untimed = [x for x, r in points if id(r) not in timed_ids]
        if mine:
            errors, times_here = zip(*mine)
            axes.scatter(errors, times_here, s=10, alpha=0.6, color=colour, label=f"{system} / {library}")
        if untimed:
            axes.scatter(untimed, [untimed_at] * len(untimed), s=18, marker="x", color=colour,
                         label=f"{system} / {library}: not timed")  # fmt: skip
    axes.axvline(1, color="k", linewidth=1)
    axes.axhline(1, color="k", linewidth=1)
    axes.axhline(untimed_at * 1.6, color="0.6", linewidth=0.8, linestyle=":")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("error / tau_acc (right of 1: F-Acc)")
    axes.set_ylabel("t_agent / tau_time (above 1: F-Time; x under the dotted line: not timed)")
    without = len(rows) - len(judged)
    if without:
        axes.text(0.01, 0.99, f"{without} item(s) without an error (F-Exec) not drawn", transform=axes.transAxes,
                  va="top", fontsize=8)  # fmt: skip
    axes.legend(fontsize=7)
    return figure


def _attempts(rows):
    import matplotlib.pyplot as plt

    multi = [r for r in rows if r["attempts"] > 1]
    if not multi:
        return None
    keep = {(r["system"], r["library"]) for r in multi}
    figure, axes = plt.subplots(layout="constrained", figsize=(6, 4))
    most = max(r["attempts"] for r in multi)
    for (system, library), part in _groups(rows).items():
        if (system, library) not in keep:
            continue
        curve = [100 * share for share in tables.passed_by_attempt(part, most)]
        axes.plot(range(1, most + 1), curve, marker="o", label=f"{system} / {library}")
    axes.set_xlabel("attempt")
    axes.set_ylabel("pass rate after attempt (%)")
    axes.set_xticks(range(1, most + 1))
    axes.legend(fontsize=8)
    return figure


def _cost(rows):
    import matplotlib.pyplot as plt

    priced = [r for r in rows if r["cost_usd"] is not None]
    if not priced:
        return None
    figure, axes = plt.subplots(layout="constrained", figsize=(6, 4))
    for (system, library), part in _groups(priced).items():
        cost = tables.total_cost(part)
        rate = 100 * tables.pass_rate(part)["rate"]
        axes.scatter([cost], [rate])
        axes.annotate(f"{system} / {library}", (cost, rate), fontsize=8)
    axes.set_xlabel("cost of new calls ($)")
    axes.set_ylabel("pass rate (%)")
    return figure
