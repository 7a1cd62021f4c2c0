// deal.II oracle for the biharmonic equation lap(lap(u)) = f with u and lap(u) given on
// the boundary: two Poisson problems with Q2 elements (calibration runs: the record's
// degree and mesh),
//   lap(w) = f, w = lap(u) data   then   lap(u) = w, u = u data.
#include "_pdebench.h"

#include <deal.II/base/quadrature_lib.h>
#include <deal.II/dofs/dof_tools.h>
#include <deal.II/fe/fe_q.h>
#include <deal.II/fe/fe_values.h>
#include <deal.II/fe/mapping_q_cache.h>
#include <deal.II/lac/affine_constraints.h>
#include <deal.II/lac/dynamic_sparsity_pattern.h>
#include <deal.II/lac/sparse_direct.h>
#include <deal.II/lac/sparse_matrix.h>
#include <deal.II/lac/sparsity_pattern.h>
#include <deal.II/numerics/vector_tools.h>

namespace pdebench
{
  // solves -lap(v) = -source with v = boundary on the ids; source: a function, or (if
  // given) the finite element field `field`
  template <int dim>
  void poisson(const DoFHandler<dim> &dh, const Mapping<dim> &mapping, const std::set<types::boundary_id> &ids,
               const Function<dim> &boundary, const Function<dim> *source, const Vector<double> *field,
               Vector<double> &v)
  {
    AffineConstraints<double> constraints;
    for (const auto id : ids)
      VectorTools::interpolate_boundary_values(mapping, dh, id, boundary, constraints);
    constraints.close();
    DynamicSparsityPattern dsp(dh.n_dofs());
    DoFTools::make_sparsity_pattern(dh, dsp, constraints, false);
    SparsityPattern pattern;
    pattern.copy_from(dsp);
    SparseMatrix<double> matrix(pattern);
    Vector<double> rhs(dh.n_dofs());
    const QGauss<dim> quadrature(dh.get_fe().degree + 1);
    FEValues<dim> fv(mapping, dh.get_fe(), quadrature,
                     update_values | update_gradients | update_quadrature_points | update_JxW_values);
    const unsigned int n = dh.get_fe().n_dofs_per_cell();
    FullMatrix<double> cell_matrix(n, n);
    Vector<double> cell_rhs(n);
    std::vector<types::global_dof_index> dofs(n);
    std::vector<double> s(quadrature.size());
    for (const auto &cell : dh.active_cell_iterators())
      {
        fv.reinit(cell);
        cell_matrix = 0;
        cell_rhs = 0;
        if (field)
          fv.get_function_values(*field, s);
        else
          source->value_list(fv.get_quadrature_points(), s);
        for (const unsigned int q : fv.quadrature_point_indices())
          for (const unsigned int i : fv.dof_indices())
            {
              for (const unsigned int j : fv.dof_indices())
                cell_matrix(i, j) += fv.shape_grad(i, q) * fv.shape_grad(j, q) * fv.JxW(q);
              cell_rhs(i) -= s[q] * fv.shape_value(i, q) * fv.JxW(q);
            }
        cell->get_dof_indices(dofs);
        constraints.distribute_local_to_global(cell_matrix, cell_rhs, dofs, matrix, rhs);
      }
    SparseDirectUMFPACK direct;
    direct.initialize(matrix);
    v.reinit(dh.n_dofs());
    direct.vmult(v, rhs);
    constraints.distribute(v);
  }

  template <int dim>
  int biharmonic(const Case &c)
  {
    const double h = c.mesh_size_or(dim == 2 ? 0.035 : 0.17);
    Triangulation<dim> tria;
    const Domain<dim> domain = make_mesh(tria, c, h);
    MappingQCache<dim> mapping(2);
    mapping.initialize(MappingQ<dim>(2), tria);
    const FE_Q<dim> fe(c.degree_or(2));
    DoFHandler<dim> dh(tria);
    dh.distribute_dofs(fe);
    const json &bc = c.spec["bc"];
    const auto f = parse<dim>(c.spec["pde"]["forcing"]["value"], false);
    const auto g = parse<dim>(bc["dirichlet"]["value"], false);
    const auto lap = parse<dim>(bc["laplacian"]["value"], false);
    Vector<double> w, u;
    poisson<dim>(dh, mapping, boundary_ids(domain, bc["laplacian"]["on"]), *lap, f.get(), nullptr, w);
    poisson<dim>(dh, mapping, boundary_ids(domain, bc["dirichlet"]["on"]), *g, nullptr, &w, u);
    const auto values = sample(dh, mapping, u, eval_grid(c), 2 * h);
    json info;
    info["mesh_resolution"] = int(std::round(domain.size / h));
    info["element_degree"] = fe.degree;
    info["num_dofs"] = dh.n_dofs();
    info["formulation"] = "two Poisson solves (w = lap u)";
    info["solver"] = "UMFPACK";
    info["converged"] = true;
    write_outputs(c, values[0], info);
    return 0;
  }

  int run_biharmonic(const Case &c)
  {
    return c.dim == 2 ? biharmonic<2>(c) : biharmonic<3>(c);
  }
}  // namespace pdebench

int main(int argc, char **argv)
{
  return pdebench::guarded_main(argc, argv, pdebench::run_biharmonic);
}
