"""Whether the exact solution of a manufactured record can be read off the TEXT of its
agent-visible data, where a distance on the grid does not see it.

leaks.py measures distances on the evaluation grid, and data far from u there can still
spell u out: the builder's boundary data are ``u + s*phi*w`` (making/hiding.py), which
sympy prints as a sum among whose terms are u's own. The searches here try to undo such a
construction on one datum D (an expression string of ``case_spec``) for the target u:

- ``subset``: u is the sum of some of D's top-level terms. Every subset is tried up to
  SUBSET_LIMIT terms; beyond that, the least-squares fit of 0/1 weights, and the subsets
  of at most SMALL_SUBSET terms or all but that many;
- ``scaled``: u is a sub-expression of D, or a constant multiple of one (least squares);
- ``vanishing``: u is D with one sub-expression set to 0, where that sub-expression
  vanishes on every boundary point the condition applies to (how phi*w is made);
- ``coordinate``: u is D with one sub-expression replaced by x (y, z), where it equals
  that coordinate on one of the condition's tags (a trace printed with the side's
  coordinate as a number of its own: exp(y + 1) on x = 1).

What is searched:
- the values of every Dirichlet, Neumann, Robin and laplacian condition, with all four
  searches (the last two on the points of ``boundaries.boundary_points`` under the
  condition's tags);
- the initial data, with the first two (no boundary piece to vanish on). ``ic.value`` IS
  u(t0), legitimately, so what is looked for in it, as in ``ic.velocity``, is u at t_end:
  that finds solutions whose final state is part or a multiple of the initial one
  (u = g(x) exp(-2t): c * ic.value is exact, and c can be read off the boundary data).
- Not searched by the check: the forcing and the coefficients (only the numerical check
  measures them), nor expressions of the unknown u (reaction terms). The forcing is built
  from u and often spells it out too: ``data_fields(..., forcing=True)`` adds it for a
  survey (docs/results/2026-11-27-text-leaks.md).

The target is u as a function of space and time for a datum that depends on t (random
points in the domain at random times in [t0, t_end]), else u at t_end (which is 0 for a
steady record). Vector data are searched per component against the matching component
of u. "Equal" means a relative L2 gap below TOLERANCE on SAMPLE_POINTS random points.

Sub-expressions are evaluated by a small numpy walk over the sympy tree, so that setting
one of them to 0 recomputes only the nodes above it, and no expression is lambdified.
``leaks`` and ``text_leaks`` are independent layers; validation.py, above both, runs the
two checks.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp

from .boundaries import boundary_points
from .cases import BC_KINDS, CaseRecord, ExpressionOrVector
from .domains import Geometry, resolve_geometry
from .expressions import expression_to_string, parse_expression, t, u, x, y, z

SEARCHES = ("subset", "scaled", "vanishing", "coordinate")
TOLERANCE = 1e-6  # relative L2 gap on the sample: data printed from u match to ~1e-15
VANISH = 1e-9  # a sub-expression vanishes on the boundary: its max there over its max inside
SAMPLE_POINTS = 64  # random points in the domain (space-time for transient data)
BOUNDARY_POINTS = 12  # per piece of a tag, as boundaries.boundary_points samples them
BOUNDARY_SAMPLE = 160  # at most this many of them per tag (a gear's tag has 64 pieces)
SUBSET_LIMIT = 16  # every subset of up to this many top-level terms (65536 sums)
SMALL_SUBSET = 3  # beyond the limit: subsets of at most 3 terms, and all terms but 3
SUBSET_CHUNK = 4096
DETAIL_LENGTH = 200  # characters of a matched expression quoted in a finding
COORDS = (x, y, z)
# a tag, the values of a datum's sub-expressions at its boundary points, and those points
TagValues = tuple[str, list[np.ndarray], dict[sp.Symbol, np.ndarray]]

NUMPY_FUNCTIONS = {
    sp.sin: np.sin,
    sp.cos: np.cos,
    sp.tan: np.tan,
    sp.exp: np.exp,
    sp.log: np.log,
    sp.sinh: np.sinh,
    sp.cosh: np.cosh,
    sp.tanh: np.tanh,
    sp.atan: np.arctan,
    sp.asin: np.arcsin,
    sp.acos: np.arccos,
    sp.Abs: np.abs,
    sp.sign: np.sign,
}


# ---- evaluating every sub-expression at once ----


@functools.lru_cache(maxsize=64)
def _fallback(func, arity: int) -> Callable[..., Any]:
    """numpy of a sympy function the table does not know (none the parser makes today)."""
    args = sp.symbols(f"a0:{arity}")
    return sp.lambdify(args, func(*args), "numpy")


def _apply(node: sp.Basic, args: list[np.ndarray]) -> np.ndarray:
    if isinstance(node, sp.Add):
        return np.sum(args, axis=0)
    if isinstance(node, sp.Mul):
        return np.prod(args, axis=0)
    if isinstance(node, sp.Pow):
        return np.power(args[0], args[1])
    if node.func in NUMPY_FUNCTIONS:
        return NUMPY_FUNCTIONS[node.func](args[0])
    if isinstance(node, sp.atan2):
        return np.arctan2(args[0], args[1])
    if isinstance(node, sp.Max):
        return np.max(np.stack(args), axis=0)
    if isinstance(node, sp.Min):
        return np.min(np.stack(args), axis=0)
    return np.asarray(_fallback(node.func, len(args))(*args), float)


class Tree:
    """The distinct sub-expressions of an expression, children before their parents
    (equal sub-expressions are one node: replacing one replaces every occurrence)."""

    def __init__(self, expr: sp.Expr):
        self.nodes: list[sp.Basic] = []
        self.children: list[tuple[int, ...]] = []
        self.reach: list[int] = []  # bit mask of the node and everything below it
        self._index: dict[sp.Basic, int] = {}
        self.root = self._add(expr)
        self.varying = [bool(node.free_symbols) for node in self.nodes]

    def _add(self, node: sp.Basic) -> int:
        if node in self._index:
            return self._index[node]
        children = tuple(self._add(arg) for arg in node.args)
        reach = 0
        for child in children:
            reach |= self.reach[child]
        index = len(self.nodes)
        self.nodes.append(node)
        self.children.append(children)
        self.reach.append(reach | (1 << index))
        self._index[node] = index
        return index

    def values(self, coords: dict[sp.Symbol, np.ndarray]) -> list[np.ndarray]:
        """Every node's values at the points ``coords`` (arrays of one length)."""
        size = len(next(iter(coords.values())))
        out: list[np.ndarray] = []
        with np.errstate(all="ignore"):
            for node, children in zip(self.nodes, self.children):
                if node.is_Symbol:
                    value = coords[node]
                elif not children:
                    value = np.full(size, float(node))
                else:
                    value = _apply(node, [out[c] for c in children])
                out.append(np.broadcast_to(np.asarray(value, float), (size,)))
        return out

    def root_with(self, base: list[np.ndarray], overrides: dict[int, np.ndarray]) -> np.ndarray:
        """The root's values with the given nodes' values replaced (only the nodes above
        them are recomputed)."""
        changed = 0
        for index in overrides:
            changed |= 1 << index
        values = list(base)
        with np.errstate(all="ignore"):
            for index, children in enumerate(self.children):
                if index in overrides:
                    values[index] = overrides[index]
                elif self.reach[index] & changed:
                    values[index] = _apply(self.nodes[index], [values[c] for c in children])
        return values[self.root]


@functools.lru_cache(maxsize=2048)
def tree(source) -> Tree:
    return Tree(parse_expression(source))


# ---- the searches ----


def _gap(candidate: np.ndarray, target: np.ndarray) -> float:
    with np.errstate(all="ignore"):
        gap = float(np.linalg.norm(candidate - target) / np.linalg.norm(target))
    return gap if np.isfinite(gap) else np.inf


def _short(expr: sp.Basic) -> str:
    text = expression_to_string(expr)
    return text if len(text) <= DETAIL_LENGTH else text[: DETAIL_LENGTH - 3] + "..."


def _subset_masks(n: int) -> Iterator[np.ndarray]:
    """0/1 rows of the subsets to try (see the module's docstring), in chunks."""
    if n <= SUBSET_LIMIT:
        for start in range(1, 2**n, SUBSET_CHUNK):
            codes = np.arange(start, min(start + SUBSET_CHUNK, 2**n))
            yield ((codes[:, None] >> np.arange(n)) & 1).astype(float)
        return
    rows = []
    for size in range(1, SMALL_SUBSET + 1):
        for chosen in itertools.combinations(range(n), size):
            row = np.zeros(n)
            row[list(chosen)] = 1
            rows += [row, 1 - row]
    yield np.array(rows)


def search_subset(tree_: Tree, values: list[np.ndarray], target: np.ndarray) -> str | None:
    """u as the sum of some of the root's top-level terms."""
    root = tree_.nodes[tree_.root]
    terms = list(tree_.children[tree_.root]) if isinstance(root, sp.Add) else [tree_.root]
    matrix = np.array([values[i] for i in terms])
    if not np.isfinite(matrix).all():
        return None
    norm = np.linalg.norm(target)
    best: np.ndarray | None = None
    for masks in _subset_masks(len(terms)):
        gaps = np.linalg.norm(masks @ matrix - target, axis=1) / norm
        if gaps.min() <= TOLERANCE:
            best = masks[int(np.argmin(gaps))]
            break
    if best is None and len(terms) > SUBSET_LIMIT:  # weights fitted, then rounded to 0/1
        weights = np.linalg.lstsq(matrix.T, target, rcond=None)[0]
        rounded = np.asarray(np.round(weights), float)
        if np.all((rounded == 0) | (rounded == 1)) and _gap(rounded @ matrix, target) <= TOLERANCE:
            best = rounded
    if best is None:
        return None
    chosen = [tree_.nodes[terms[i]] for i in np.flatnonzero(best)]
    return f"the sum of {len(chosen)} of its {len(terms)} top-level terms: {_short(sp.Add(*chosen))}"


def search_scaled(tree_: Tree, values: list[np.ndarray], target: np.ndarray) -> str | None:
    """u as a sub-expression, or a multiple of one (a constant's multiple tells nothing)."""
    candidates = [i for i, varying in enumerate(tree_.varying) if varying and np.isfinite(values[i]).all()]
    if not candidates:
        return None
    matrix = np.array([values[i] for i in candidates])
    squares = np.einsum("ij,ij->i", matrix, matrix)
    scales = np.where(squares > 0, matrix @ target / np.where(squares > 0, squares, 1), 0.0)
    gaps = np.linalg.norm(scales[:, None] * matrix - target, axis=1) / np.linalg.norm(target)
    best = int(np.argmin(gaps))
    if gaps[best] > TOLERANCE:
        return None
    node, scale = tree_.nodes[candidates[best]], float(scales[best])
    if abs(scale - 1) <= TOLERANCE:
        return f"its sub-expression {_short(node)}"
    return f"{scale:.6g} times its sub-expression {_short(node)}"


def _largest(values: np.ndarray) -> float:
    with np.errstate(all="ignore"):
        return float(np.max(np.abs(values))) if values.size else 0.0


def search_vanishing(
    tree_: Tree, values: list[np.ndarray], target: np.ndarray, on_boundary: list[np.ndarray]
) -> str | None:
    """u as the datum with a sub-expression that vanishes on the boundary set to 0."""
    for index, varying in enumerate(tree_.varying):
        if not varying or index == tree_.root:
            continue
        inside = _largest(values[index])
        if not (np.isfinite(inside) and inside > 0 and _largest(on_boundary[index]) <= VANISH * inside):
            continue
        changed = tree_.root_with(values, {index: np.zeros_like(target)})
        if _gap(changed, target) <= TOLERANCE:
            return f"the datum with its sub-expression {_short(tree_.nodes[index])} (zero where it applies) set to 0"
    return None


def search_coordinate(
    tree_: Tree,
    values: list[np.ndarray],
    target: np.ndarray,
    coords: dict[sp.Symbol, np.ndarray],
    tags: list[TagValues],
    dim: int,
) -> str | None:
    """u as the datum with a sub-expression that equals x (y, z) on one of its tags
    replaced by that coordinate."""
    for tag, on_tag, tag_coords in tags:
        for axis in COORDS[:dim]:
            wanted = tag_coords[axis]
            slack = VANISH * max(1.0, _largest(wanted))
            for index, node in enumerate(tree_.nodes):
                if node == axis or index == tree_.root or not np.isfinite(on_tag[index]).all():
                    continue
                if _largest(on_tag[index] - wanted) > slack:
                    continue
                changed = tree_.root_with(values, {index: coords[axis]})
                if _gap(changed, target) <= TOLERANCE:
                    shown = _short(node)
                    return f"the datum with its sub-expression {shown} (equal to {axis} on {tag}) replaced by {axis}"
    return None


# ---- records: the data, the points, the findings ----


@dataclass(frozen=True)
class Datum:
    where: str  # the location in case_spec
    value: ExpressionOrVector  # an expression, or a list of them
    tags: tuple[str, ...] | None  # the boundary tags it applies to (None: initial data)


def data_fields(record: CaseRecord, forcing: bool = False) -> list[Datum]:
    """The agent-visible data searched (see the module's docstring)."""
    spec = record.case_spec
    data = [
        Datum(f"bc.{kind}[{index}].value", condition.value, tuple(condition.tags))
        for kind in BC_KINDS
        for index, condition in enumerate(spec.bc.conditions(kind))
    ]
    if spec.ic is not None:
        data.append(Datum("ic.value", spec.ic.value, None))
        if spec.ic.velocity is not None:
            data.append(Datum("ic.velocity", spec.ic.velocity, None))
    if forcing and spec.pde.forcing is not None:
        data.append(Datum("pde.forcing", spec.pde.forcing.value, None))
    return data


def manufactured(record: CaseRecord) -> bool:
    """As leaks.manufactured (an independent layer: not imported)."""
    meta = record.evaluation_metadata
    return meta.construction_method == "manufactured_solution" and "u" in (meta.manufactured_solution or {})


@dataclass(frozen=True)
class Finding:
    where: str  # the datum (and component)
    search: str  # one of SEARCHES
    target: str  # "u" or "u[1]", and when
    detail: str  # what it matched

    def __str__(self) -> str:
        return f"{self.where} spells out the exact {self.target} in its text ({self.search}): it is {self.detail}"


def _rng(record: CaseRecord) -> np.random.Generator:
    digest = hashlib.sha256(f"{record.id}:text-leaks".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _inside(geometry: Geometry, rng: np.random.Generator, count: int) -> np.ndarray:
    box = np.array(geometry.bbox)
    found = np.zeros((0, geometry.dim))
    for _ in range(100):  # rejection sampling: a gear or star fills a good part of its box
        points = rng.uniform(box[0::2], box[1::2], size=(4 * count, geometry.dim))
        found = np.concatenate([found, points[geometry.mask(points)]])
        if len(found) >= count:
            break
    return found[:count]


def _coords(points: np.ndarray, times: np.ndarray) -> dict[sp.Symbol, np.ndarray]:
    coords = {axis: points[:, i] for i, axis in enumerate(COORDS[: points.shape[1]])}
    coords.update({axis: np.zeros(len(points)) for axis in COORDS[points.shape[1] :]})
    coords[t] = times
    return coords


class Sampler:
    """A record's random points: in the domain, and on the boundary under each tag, with
    times in [t0, t_end] for transient data (t_end for data without t)."""

    def __init__(self, record: CaseRecord):
        spec = record.case_spec
        self.geometry = resolve_geometry(record.case_spec_dict()["domain"])
        time = spec.pde.time
        self.t0, self.t_end = (time.t0, time.t_end) if time else (0.0, 0.0)
        self.rng = _rng(record)
        self.points = _inside(self.geometry, self.rng, SAMPLE_POINTS)
        self.times = self.rng.uniform(self.t0, self.t_end, len(self.points))
        self._tags: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def inside(self, timed: bool) -> dict[sp.Symbol, np.ndarray]:
        return _coords(self.points, self.times if timed else np.full(len(self.points), self.t_end))

    def on(self, tag: str, timed: bool) -> dict[sp.Symbol, np.ndarray]:
        if tag not in self._tags:
            points = boundary_points(self.geometry, tag, BOUNDARY_POINTS)
            if len(points) > BOUNDARY_SAMPLE:
                points = points[np.sort(self.rng.choice(len(points), BOUNDARY_SAMPLE, replace=False))]
            self._tags[tag] = (points, self.rng.uniform(self.t0, self.t_end, len(points)))
        points, times = self._tags[tag]
        return _coords(points, times if timed else np.full(len(points), self.t_end))


def _components(value) -> list[tuple[int | None, object]]:
    return list(enumerate(value)) if isinstance(value, list) else [(None, value)]


def _varying(source) -> bool:
    """An expression of space or time (a number or a constant carries nothing)."""
    symbols = parse_expression(source, allow=("u",)).free_symbols
    return bool(symbols & {x, y, z, t}) and u not in symbols


def _searched(
    data_tree: Tree,
    values: list[np.ndarray],
    target: np.ndarray,
    coords: dict[sp.Symbol, np.ndarray],
    boundary: list[TagValues],
    dim: int,
    searches,
) -> dict[str, str | None]:
    """{search: what it matched, or None} for one datum and one target (the boundary
    searches need the datum's tags: ``boundary`` holds (tag, node values, points) of each)."""
    found = {}
    if "subset" in searches:
        found["subset"] = search_subset(data_tree, values, target)
    if "scaled" in searches:
        found["scaled"] = search_scaled(data_tree, values, target)
    if boundary and "vanishing" in searches:
        on_boundary = [np.concatenate(parts) for parts in zip(*(on_tag for _, on_tag, _ in boundary))]
        found["vanishing"] = search_vanishing(data_tree, values, target, on_boundary)
    if boundary and "coordinate" in searches:
        found["coordinate"] = search_coordinate(data_tree, values, target, coords, boundary, dim)
    return found


def datum_findings(datum: Datum, solution, sampler: Sampler, searches=SEARCHES) -> list[Finding]:
    """Every search's finding on one datum (each component) for the exact ``solution``
    (u's record text: an expression or a list)."""
    exact, components = _components(solution), _components(datum.value)
    transient = sampler.t_end > sampler.t0
    findings = []
    for component, source in components:
        if not _varying(source):
            continue
        data_tree = tree(source)
        timed = transient and t in data_tree.nodes[data_tree.root].free_symbols
        coords = sampler.inside(timed)
        values = data_tree.values(coords)
        boundary = []
        if datum.tags is not None and {"vanishing", "coordinate"} & set(searches):
            for tag in datum.tags:
                tag_coords = sampler.on(tag, timed)
                boundary.append((tag, data_tree.values(tag_coords), tag_coords))
        where = datum.where if component is None else f"{datum.where}[{component}]"
        # the matching component of u; a scalar datum of a vector field (or the reverse): every one
        targets = [exact[component]] if component is not None and len(exact) == len(components) else exact
        for target_index, target_source in targets:
            target_tree = tree(target_source)
            target = target_tree.values(coords)[target_tree.root]
            if not np.isfinite(target).all() or np.linalg.norm(target) <= 1e-12:
                continue  # a zero component has nothing to hide
            name = "u" if target_index is None else f"u[{target_index}]"
            name += " (as a function of space and time)" if timed else " at t_end" if transient else ""
            found = _searched(data_tree, values, target, coords, boundary, sampler.geometry.dim, searches)
            findings += [Finding(where, search, name, detail) for search, detail in found.items() if detail]
    return findings


def text_findings(record: CaseRecord, searches=SEARCHES, forcing: bool = False) -> list[Finding]:
    """What every search finds in a manufactured record's data (empty: nothing, or not
    manufactured)."""
    if not manufactured(record):
        return []
    solution = (record.evaluation_metadata.manufactured_solution or {})["u"]
    sampler = Sampler(record)
    return [f for datum in data_fields(record, forcing) for f in datum_findings(datum, solution, sampler, searches)]


def text_leak_problems(record: CaseRecord) -> list[str]:
    """The findings as leak problems: one line per datum (and component), naming the
    searches that found u in it and what the first matched. A record whose solution has a
    part only a solve recovers (``evaluation_metadata.solve_only``, making/solve_only.py)
    has none: what the text can give is the manufactured u, which misses the solution by
    that part (at least 5 x tau_acc, validation.check_solve_only)."""
    if record.evaluation_metadata.solve_only is not None:
        return []
    by_place: dict[str, list[Finding]] = {}
    for finding in text_findings(record):
        by_place.setdefault(finding.where, []).append(finding)
    return [
        f"{found[0].where} spells out the exact {found[0].target} in its text "
        f"({', '.join(f.search for f in found)}): it is {found[0].detail}"
        for found in by_place.values()
    ]


# ---- the survey (docs/results/2026-11-27-text-leaks.md) ----

KINDS = (*BC_KINDS, "ic.value", "ic.velocity", "pde.forcing")


def _kind(where: str) -> str:
    return where.split("[")[0].removeprefix("bc.") if where.startswith("bc.") else where.split("[")[0]


def survey(records: list[CaseRecord], forcing: bool = False, fmt: str = "github") -> str:
    """Per family: manufactured records, how many each search flags and how many any
    search flags; then per kind of datum, how many data any search flags; and the time."""
    import time

    from tabulate import tabulate

    rows: dict[str, Counter] = {}
    kinds: Counter = Counter()
    started = time.perf_counter()
    for record in records:
        row = rows.setdefault(record.family, Counter())
        row["records"] += 1
        if not manufactured(record):
            continue
        row["manufactured"] += 1
        findings = text_findings(record, forcing=forcing)
        for search in {f.search for f in findings}:
            row[search] += 1
        row["any"] += bool(findings)
        flagged = {f.where.split("]")[0] for f in findings}  # a datum, its components together
        for datum in data_fields(record, forcing):
            kinds[(_kind(datum.where), "searched")] += 1
            kinds[(_kind(datum.where), "flagged")] += datum.where.split("]")[0] in flagged
    seconds = time.perf_counter() - started
    columns = ["records", "manufactured", *SEARCHES, "any"]
    total = sum(rows.values(), Counter())
    families = tabulate(
        [[family, *(row[c] for c in columns)] for family, row in sorted(rows.items())]
        + [["all", *(total[c] for c in columns)]],
        headers=["family", *columns],
        tablefmt=fmt,
    )
    by_kind = tabulate(
        [[kind, kinds[(kind, "searched")], kinds[(kind, "flagged")]] for kind in KINDS if kinds[(kind, "searched")]],
        headers=["datum", "searched", "flagged by any search"],
        tablefmt=fmt,
    )
    manufactured_count = max(total["manufactured"], 1)
    return (
        f"{families}\n\n{by_kind}\n\n{len(records)} records, {total['manufactured']} manufactured, "
        f"in {seconds:.1f} s ({1000 * seconds / manufactured_count:.0f} ms a manufactured record)"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_pdebench.text_leaks [CASES] [--forcing]``: the survey of a case
    file or folder (default: the bundled cases)."""
    import argparse

    from .bundled import bundled
    from .cases import load_cases

    parser = argparse.ArgumentParser(prog="python -m pytest_pdebench.text_leaks", description=main.__doc__)
    parser.add_argument("cases", nargs="?", default=None, help="a JSONL case file or a folder of them")
    parser.add_argument("--forcing", action="store_true", help="search the forcing too (not a leak check datum)")
    parser.add_argument("--format", default="github", help="tabulate's table format")
    args = parser.parse_args(argv)
    records = [record for _, _, record in load_cases(Path(args.cases) if args.cases else bundled("cases"))]
    print(survey(records, args.forcing, args.format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
