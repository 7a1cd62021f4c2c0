"""Template-guided mode (Appendix M): the scaffold of every case holds no numerics,
compiles (Python), and once its TODOs are filled it passes the gates on every track."""

from __future__ import annotations

import json
import re

import pytest

from pytest_pdebench.cases import CaseRecord, agent_view, load_cases
from pytest_pdebench.scaffolds import scaffold_for
from pytest_pdebench.testing import REPO, STARTER, record_dict, run_track, write_calibration, write_jsonl

FILLED_DOLFINX = '''
def build_mesh(case_spec):
    return mesh.create_unit_square(MPI.COMM_WORLD, 24, 24)


def solve_problem(case_spec, msh):
    V = fem.functionspace(msh, ("Lagrange", 2))
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    f = expression(case_spec["pde"]["forcing"]["value"], msh)
    boundary_value = fem.Function(V)
    boundary_value.interpolate(fem.Expression(expression(case_spec["bc"]["dirichlet"]["value"], msh),
                                              V.element.interpolation_points))
    msh.topology.create_connectivity(1, 2)
    dofs = fem.locate_dofs_topological(V, 1, mesh.exterior_facet_indices(msh.topology))
    problem = dolfinx.fem.petsc.LinearProblem(
        ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx, f * v * ufl.dx, bcs=[fem.dirichletbc(boundary_value, dofs)],
        petsc_options_prefix="filled_", petsc_options={"ksp_type": "preonly", "pc_type": "lu"})
    return problem.solve(), {"element_degree": 2}
'''


def test_every_scaffold_compiles_and_leaves_the_numerics_open():
    for folder in (REPO / "cases", STARTER):
        for _, _, record in load_cases(folder):
            code = scaffold_for(agent_view(record, "dolfinx"))
            compile(code, record.id, "exec")
            assert code.count("TODO") >= 2 and "LinearProblem(" not in code and "dirichletbc(" not in code


def test_firedrake_and_dealii_scaffolds_leave_the_numerics_open():
    for _, _, record in load_cases(REPO / "cases"):
        for library in record.supported_libraries:
            if library == "dolfinx":
                continue
            code = scaffold_for(agent_view(record, library))
            assert code.count("TODO") >= 3, (record.id, library)
            if library == "firedrake":
                compile(code, record.id, "exec")
                assert "solve(" not in code.split("# ---- the numerics: yours ----")[1].replace("def solve(", "")
            else:
                assert "@" not in code and "constexpr int DIM = " in code
                assert "SparseDirectUMFPACK direct" not in code and "interpolate_boundary_values" not in code


FILLED_FIREDRAKE = '''
def build_mesh(case_spec):
    return fd.UnitSquareMesh(24, 24)


def solve_problem(case_spec, msh):
    V = fd.FunctionSpace(msh, "CG", 2)
    u, v = fd.TrialFunction(V), fd.TestFunction(V)
    f = expression(case_spec["pde"]["forcing"]["value"], msh)
    g = expression(case_spec["bc"]["dirichlet"]["value"], msh)
    solution = fd.Function(V)
    fd.solve(fd.inner(fd.grad(u), fd.grad(v)) * fd.dx == f * v * fd.dx, solution,
             bcs=[fd.DirichletBC(V, g, "on_boundary")], solver_parameters={"ksp_type": "preonly", "pc_type": "lu"})
    return solution, {"element_degree": 2}
'''

def filled_dealii_scaffold(record: dict) -> str:
    """The C++ scaffold with its TODOs done by the deal.II guide's Poisson solver."""
    guide = (REPO / "guides" / "DEALII_GUIDE.md").read_text()
    solver = next(block for block in re.findall(r"^```cpp\n(.*?)^```", guide, re.S | re.M)
                  if "void solve_poisson(" in block)
    code = scaffold_for(agent_view(CaseRecord.model_validate(record), "dealii"))
    code = code.replace("// ---- the numerics: yours ----", solver + "\n// ---- the numerics: yours ----")
    code = code.replace('AssertThrow(false, ExcMessage("TODO: build the mesh"));',
                        "GridGenerator::subdivided_hyper_cube(tria, 16, 0.0, 1.0);")
    code = code.replace('AssertThrow(false, ExcMessage("TODO: choose the element"));\n  return nullptr;',
                        "return std::make_unique<FE_Q<DIM>>(2);")
    return code.replace('AssertThrow(false, ExcMessage("TODO: weak form, boundary conditions, solve"));',
                        'solve_poisson(dh, mapping, *expression(spec["pde"]["forcing"]["value"]),\n'
                        '                *expression(spec["bc"]["dirichlet"]["value"]), u);')


@pytest.mark.parametrize("library", ["dolfinx", "firedrake", "dealii"])
def test_filled_scaffold_passes(library, tmp_path, request):
    request.getfixturevalue(f"{library}_available")
    record = record_dict(new_id="toy_scaffold", nx=20, ny=20)
    write_jsonl(tmp_path / "cases.jsonl", [record])
    write_calibration(tmp_path / "calibrations", library, [record], 1e-4, 5.0)
    folder = tmp_path / "solvers" / library
    folder.mkdir(parents=True)
    if library == "dealii":
        (folder / "solver.cpp").write_text(filled_dealii_scaffold(record))
    else:
        scaffold = scaffold_for(agent_view(CaseRecord.model_validate(record), library))
        start, end = scaffold.index("def build_mesh"), scaffold.index("def solve(case_spec)")
        filled = {"dolfinx": FILLED_DOLFINX, "firedrake": FILLED_FIREDRAKE}[library]
        (folder / "solver.py").write_text(scaffold[:start] + filled.lstrip() + "\n\n" + scaffold[end:])
    done, outcomes = run_track(tmp_path, library, tmp_path / "cases.jsonl", folder.parent,
                               f"--pde-calibrations={tmp_path / 'calibrations'}")
    verdict = outcomes["toy_scaffold"]
    assert verdict["outcome"] == "PASS", (verdict["reason"], done.stdout[-2000:])
    assert json.loads((tmp_path / "out" / library / "toy_scaffold" / "meta.json").read_text())["status"] == "success"
