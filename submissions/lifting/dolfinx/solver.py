"""Lifting (issue 66): an honest finite-element solve of only the part of the solution the
case's text does not give away.

A manufactured case's answer is u = S + w, with S a closed form and w a part only a solve
recovers. S is found in the text: it is the subset of the Dirichlet data's top-level terms
whose residual L(S) is a sum of the forcing's top-level terms (checked at random points, the
operator applied by sympy); the forcing's other terms drive w. The textbook solver of the
family (submissions/textbook, the same mesh, element and time steps) then solves for w alone:
forcing f - L(S), Dirichlet data g - S, Neumann and Robin data less S's flux, initial data
less S at t0. The output is S, exact at the grid points, plus w sampled there. Where no subset
fits, S = 0 and the solve is the plain one.

The setting (``_setting.py``: CELLS, DEGREE, LIFT) lets benchmarks/lifting_gain.py compare the
lifted solve with the plain one (LIFT = False) on the same mesh and element. Families: poisson,
helmholtz, heat, convection_diffusion, reaction_diffusion (w's reaction R(w + S) - R(S)), wave
(u_t at t0 less S's too), biharmonic (lap(u) data less lap(S)), linear elasticity and Stokes (S a vector; Stokes's w
takes the whole f + nu lap(S)), Burgers and Navier-Stokes (their textbook solvers write the forms
in S + w: _textbook.OFFSET).
"""

import importlib
import json

import numpy as np
import sympy as sp

import _closed_form as cf
import _setting
import _textbook as tb


def on_grid(spec, s):
    """S at the evaluation grid's points at t_end, shaped as _textbook.sample shapes a field."""
    axes = tb.grid_axes(spec)
    grids = list(reversed(np.meshgrid(*reversed(axes), indexing="ij")))
    time_ = spec["pde"].get("time")
    columns = cf.as_columns(grids, np.full_like(grids[0], time_["t_end"] if time_ else 0.0))
    if isinstance(s, list):  # a vector: the components on the last axis
        return np.stack([cf.values(part, columns).reshape(grids[0].shape) for part in s], axis=-1)
    return cf.values(s, columns).reshape(grids[0].shape)


def solve(case_spec):
    tb.CELLS_2D, tb.CELLS_3D, tb.DEGREE = _setting.CELLS_2D, _setting.CELLS_3D, _setting.DEGREE
    family = case_spec["pde"]["type"]
    if family not in cf.FLUX:
        raise NotImplementedError(f"the lifting rung solves {', '.join(cf.FLUX)}, not {family}")
    textbook = importlib.import_module(f"_tb_{family}")
    s, rest = cf.closed_form(case_spec) if _setting.LIFT else (sp.Integer(0), None)
    terms = [term for part in (s if isinstance(s, list) else [s]) for term in sp.Add.make_args(part) if term != 0]
    if not terms:
        return textbook.solve(case_spec)
    plain_sample, lift = tb.sample, on_grid(case_spec, s)
    tb.sample = lambda uh, spec: plain_sample(uh, spec) + lift  # the output: S + w
    if family in cf.OFFSET:  # the forms in S + w (S of t: a fem.Constant's value)
        closed = [cf.text(part) for part in s] if isinstance(s, list) else cf.text(s)
        tb.OFFSET = lambda msh, t=0.0: tb.expr(closed, msh, t)
    try:
        textbook.solve(cf.lifted_spec(case_spec, s, rest))
    finally:
        tb.sample, tb.OFFSET = plain_sample, None
    with open("meta.json") as handle:
        meta = json.load(handle)
    meta["solver_info"]["lifted_terms"] = len(terms)
    with open("meta.json", "w") as handle:
        json.dump(meta, handle)
