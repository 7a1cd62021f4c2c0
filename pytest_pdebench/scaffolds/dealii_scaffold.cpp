// Solver for the @FAMILY@ case: fill in the TODOs (mesh, element, weak form, boundary
// and initial conditions, solver); the input, sampling and output code is ready.
#include <deal.II/base/function_parser.h>
#include <deal.II/base/quadrature_lib.h>
#include <deal.II/dofs/dof_handler.h>
#include <deal.II/dofs/dof_tools.h>
#include <deal.II/fe/fe_q.h>
#include <deal.II/fe/fe_system.h>
#include <deal.II/fe/fe_values.h>
#include <deal.II/fe/mapping_q.h>
#include <deal.II/grid/grid_generator.h>
#include <deal.II/grid/grid_in.h>
#include <deal.II/grid/grid_tools.h>
#include <deal.II/grid/grid_tools_cache.h>
#include <deal.II/grid/manifold_lib.h>
#include <deal.II/grid/tria.h>
#include <deal.II/lac/affine_constraints.h>
#include <deal.II/lac/dynamic_sparsity_pattern.h>
#include <deal.II/lac/sparse_direct.h>
#include <deal.II/lac/sparse_matrix.h>
#include <deal.II/lac/vector.h>
#include <deal.II/numerics/vector_tools.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace dealii;
using json = nlohmann::json;

constexpr int DIM = @DIM@;

// ---- provided by the harness's scaffold: input, expressions, grid sampling, output ----

// a case_spec expression (string, number, or a list for a vector) as a muparser function
// of x, y[, z] and, if time_dependent, t (call set_time)
std::unique_ptr<FunctionParser<DIM>> expression(const json &value, bool time_dependent = false)
{
  std::vector<std::string> texts;
  for (const json &v : value.is_array() ? value : json::array({value}))
    {
      std::string s = v.is_string() ? v.get<std::string>() : std::to_string(v.get<double>());
      for (std::size_t at = s.find("**"); at != std::string::npos; at = s.find("**", at))
        s.replace(at, 2, "^");  // sympy's power is muparser's ^
      texts.push_back(s);
    }
  auto f = std::make_unique<FunctionParser<DIM>>(texts.size());
  const std::string variables = std::string(DIM == 2 ? "x,y" : "x,y,z") + (time_dependent ? ",t" : "");
  f->initialize(variables, texts, {{"pi", M_PI}, {"e", std::exp(1.0)}, {"E", std::exp(1.0)}}, time_dependent);
  return f;
}

// values of every component of the finite element field at the grid points (x fastest,
// then y, then z); points within `reach` outside the mesh take the nearest cell's value,
// points farther out are NaN
std::vector<std::vector<double>> sample(const DoFHandler<DIM> &dh, const Mapping<DIM> &mapping,
                                        const Vector<double> &u, const json &grid, double reach)
{
  const int nx = grid["nx"], ny = grid["ny"], nz = DIM == 3 ? int(grid["nz"]) : 1;
  const auto b = grid["bbox"].get<std::vector<double>>();
  const auto &tria = dh.get_triangulation();
  const auto &fe = dh.get_fe();
  GridTools::Cache<DIM> cache(tria, mapping);
  std::vector<std::vector<double>> out(fe.n_components(),
                                       std::vector<double>(std::size_t(nx) * ny * nz, std::nan("")));
  std::vector<types::global_dof_index> dofs(fe.n_dofs_per_cell());
  auto hint = tria.begin_active();
  auto axis = [&](int d, int i, int n) { return n > 1 ? b[2 * d] + i * (b[2 * d + 1] - b[2 * d]) / (n - 1) : b[2 * d]; };
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i)
        {
          Point<DIM> p;
          p[0] = axis(0, i, nx);
          p[1] = axis(1, j, ny);
          if constexpr (DIM == 3)
            p[2] = axis(2, k, nz);
          typename Triangulation<DIM>::active_cell_iterator cell;
          Point<DIM> unit;
          try
            {
              const auto found = GridTools::find_active_cell_around_point(cache, p, hint);
              cell = found.first;
              unit = found.second;
            }
          catch (const std::exception &)
            {
            }
          if (cell.state() != IteratorState::valid)  // outside: the nearest point of the closest vertex's cells
            {
              double best = reach;
              const unsigned int v = GridTools::find_closest_vertex(mapping, tria, p);
              for (const auto &candidate : cache.get_vertex_to_cell_map()[v])
                try
                  {
                    const Point<DIM> q =
                      GeometryInfo<DIM>::project_to_unit_cell(mapping.transform_real_to_unit_cell(candidate, p));
                    const double distance = mapping.transform_unit_to_real_cell(candidate, q).distance(p);
                    if (distance < best)
                      best = distance, cell = candidate, unit = q;
                  }
                catch (const std::exception &)
                  {
                  }
              if (cell.state() != IteratorState::valid)
                continue;
            }
          hint = cell;
          const typename DoFHandler<DIM>::active_cell_iterator dof_cell(&tria, cell->level(), cell->index(), &dh);
          dof_cell->get_dof_indices(dofs);
          const std::size_t at = (std::size_t(k) * ny + j) * nx + i;
          for (unsigned int c = 0; c < fe.n_components(); ++c)
            {
              double value = 0;
              for (unsigned int s = 0; s < dofs.size(); ++s)
                if (fe.system_to_component_index(s).first == c)
                  value += u[dofs[s]] * fe.shape_value_component(s, unit, c);
              out[c][at] = value;
            }
        }
  return out;
}

// ---- the numerics: yours ----

void build_mesh(const json &spec, Triangulation<DIM> &tria)
{
  // TODO: a mesh of the @DOMAIN@ domain (see spec["domain"]), refined enough
  (void)spec, (void)tria;
  AssertThrow(false, ExcMessage("TODO: build the mesh"));
}

std::unique_ptr<FiniteElement<DIM>> make_element(const json &spec)
{
  // TODO: the finite element (e.g. FE_Q<DIM>(2), or an FESystem for vector problems)
  (void)spec;
  AssertThrow(false, ExcMessage("TODO: choose the element"));
  return nullptr;
}

// the solution@TRANSIENT@ in `u` (dh already has its dofs), and solver facts in `info`
void solve_problem(const json &spec, const Mapping<DIM> &mapping, const DoFHandler<DIM> &dh, Vector<double> &u,
                   json &info)
{
  // TODO: constraints (boundary conditions), assembly, solve@TRANSIENT_TODO@
  (void)spec, (void)mapping, (void)dh, (void)u, (void)info;
  AssertThrow(false, ExcMessage("TODO: weak form, boundary conditions, solve"));
}

// ---- provided: main ----

int main(int argc, char **argv)
{
  const auto started = std::chrono::steady_clock::now();
  std::ifstream in(argv[1]);
  const json spec = json::parse(in)["case_spec"];
  Triangulation<DIM> tria;
  build_mesh(spec, tria);
  const auto fe = make_element(spec);
  DoFHandler<DIM> dh(tria);
  dh.distribute_dofs(*fe);
  const MappingQ<DIM> mapping(2);
  Vector<double> u(dh.n_dofs());
  json info = json::object();  // solver facts: an object even if nothing is added
  solve_problem(spec, mapping, dh, u, info);
  const auto values = sample(dh, mapping, u, spec["eval_grid"], 2 * GridTools::maximal_cell_diameter(tria));

  const json &output = spec["output"];
  std::vector<std::string> names;
  if (output.contains("components"))
    names = output["components"].get<std::vector<std::string>>();
  else
    names.push_back(output.value("field", "scalar") == "scalar" ? "u" : output["field"].get<std::string>());
  const std::string outdir = argv[2];
  for (const std::string &name : names)
    {
      std::vector<double> array = values[0];
      if (name.size() > 10 && name.substr(name.size() - 10) == "_magnitude")
        for (std::size_t k = 0; k < array.size(); ++k)
          {
            double sum = 0;
            for (int d = 0; d < DIM; ++d)
              sum += values[d][k] * values[d][k];
            array[k] = std::sqrt(sum);
          }
      else if (fe->n_components() > 1)  // u_x, u_y, u_z or p
        {
          const auto axis = std::string("xyz").find(name.back());
          array = values[name == "p" || axis == std::string::npos ? DIM : axis];
        }
      const std::string file = outdir + "/" + (names.size() == 1 ? std::string("solution_grid") : name) + ".bin";
      std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char *>(array.data()), std::streamsize(array.size() * sizeof(double)));
    }
  json meta;
  meta["wall_time_sec"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  meta["status"] = "success";
  meta["solver_info"] = info;
  std::ofstream(outdir + "/meta.json") << meta.dump() << "\n";
  return 0;
}
