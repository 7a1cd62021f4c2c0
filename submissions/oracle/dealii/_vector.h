// deal.II oracle for the vector families (one program, the family read from the case):
//
//   linear_elasticity  -div(2 mu eps(u) + lambda tr(eps(u)) I) = f      Q2 displacement
//   stokes             -nu lap(u) + grad(p) = f, div(u) = 0              Taylor-Hood Q2-Q1
//   navier_stokes      (u . grad) u - nu lap(u) + grad(p) = f, div u = 0 Taylor-Hood, Newton
//
// Dirichlet data on the whole boundary (the deal.II track's cases). The pressure is then
// fixed only up to a constant, and interpolated data on a curved boundary carries a small
// net flux, so div(u) = 0 tested with the constant has no solution: pinning one pressure
// value would dump that flux into the cells around it (seen: 7% errors near the pinned
// point on the annulus). A tiny pressure mass term (eps p q, eps = 1e-8 / nu) spreads it
// instead. One coupled system, UMFPACK. Navier-Stokes: Picard (Oseen) iterations first,
// then Newton, starting from the Stokes solution (the first iterate).
#pragma once

#include "_pdebench.h"

#include <deal.II/base/quadrature_lib.h>
#include <deal.II/dofs/dof_tools.h>
#include <deal.II/fe/fe_q.h>
#include <deal.II/fe/fe_system.h>
#include <deal.II/fe/fe_values.h>
#include <deal.II/fe/fe_values_extractors.h>
#include <deal.II/fe/mapping_q_cache.h>
#include <deal.II/lac/affine_constraints.h>
#include <deal.II/lac/dynamic_sparsity_pattern.h>
#include <deal.II/lac/sparse_direct.h>
#include <deal.II/lac/sparse_matrix.h>
#include <deal.II/lac/sparsity_pattern.h>
#include <deal.II/numerics/vector_tools.h>

namespace pdebench
{
  constexpr unsigned int PICARD_ITERATIONS = 3;  // before Newton: robust at Re = 100 from Stokes

  inline double number(const json &value)
  {
    if (value.is_number())
      return value.get<double>();
    return std::stod(value.get<std::string>());
  }

  template <int dim>
  class VectorSolver
  {
  public:
    explicit VectorSolver(const Case &c);
    int run();

  private:
    void constrain(AffineConstraints<double> &constraints, bool homogeneous) const;
    void assemble(bool newton);

    const Case &c;
    const bool flow, convective;
    const double h;
    Triangulation<dim> tria;
    Domain<dim> domain;
    FESystem<dim> fe;
    MappingQCache<dim> mapping;
    DoFHandler<dim> dh;
    double mu = 1, lambda = 0, nu = 1;
    std::unique_ptr<FunctionParser<dim>> forcing, dirichlet;
    std::set<types::boundary_id> dirichlet_ids;
    AffineConstraints<double> homogeneous;
    SparsityPattern pattern;
    SparseMatrix<double> matrix;
    Vector<double> u, rhs, delta;
    unsigned int newton_iterations = 0;
    bool converged = true;
  };

  template <int dim>
  VectorSolver<dim>::VectorSolver(const Case &c)
    : c(c)
    , flow(c.family == "stokes" || c.family == "navier_stokes")
    , convective(c.family == "navier_stokes")
    , h(c.mesh_size_or(flow ? (dim == 2 ? 0.05 : 0.2) : (dim == 2 ? 0.035 : 0.2)))
    , fe(FE_Q<dim>(flow ? 2 : c.degree_or(2)), dim, FE_Q<dim>(1), flow ? 1 : 0)  // flows stay Taylor-Hood; no pressure block for elasticity
    , mapping(2)
    , dh(tria)
  {
    domain = make_mesh(tria, c, h);
    mapping.initialize(MappingQ<dim>(2), tria);
    const json &pde = c.spec["pde"], &bc = c.spec["bc"];
    const json &params = pde.value("params", json::object());
    if (flow)
      nu = number(params["nu"]);
    else if (params.contains("mu") && params.contains("lambda"))
      {
        mu = number(params["mu"]);
        lambda = number(params["lambda"]);
      }
    else
      {
        const double E = number(params["E"]), pr = number(params["nu"]);  // plane strain in 2-D
        mu = E / (2 * (1 + pr));
        lambda = E * pr / ((1 + pr) * (1 - 2 * pr));
      }
    forcing = parse<dim>(pde["forcing"]["value"], false);
    json data = bc["dirichlet"]["value"];
    if (flow)
      data.push_back("0");  // a value for the pressure component, masked out below
    dirichlet = parse<dim>(data, false);
    dirichlet_ids = boundary_ids(domain, bc["dirichlet"]["on"]);
    for (const char *kind : {"neumann", "robin", "periodic"})
      if (bc.contains(kind))
        throw std::runtime_error(std::string("bc.") + kind + " is not implemented by the deal.II vector oracle");
  }

  template <int dim>
  void VectorSolver<dim>::constrain(AffineConstraints<double> &constraints, bool homogeneous_values) const
  {
    constraints.clear();
    const FEValuesExtractors::Vector velocity(0);
    const ComponentMask mask = fe.component_mask(velocity);
    const Functions::ZeroFunction<dim> zero(fe.n_components());
    const Function<dim> *data = homogeneous_values ? static_cast<const Function<dim> *>(&zero) : dirichlet.get();
    for (const auto id : dirichlet_ids)
      VectorTools::interpolate_boundary_values(mapping, dh, id, *data, constraints, mask);
    constraints.close();
  }

  // the Jacobian (= the operator for linear problems) and rhs = -residual at u
  template <int dim>
  void VectorSolver<dim>::assemble(bool newton)
  {
    const QGauss<dim> quadrature(fe.degree + 1);
    FEValues<dim> fv(mapping, fe, quadrature,
                     update_values | update_gradients | update_quadrature_points | update_JxW_values);
    const FEValuesExtractors::Vector velocity(0);
    const FEValuesExtractors::Scalar pressure(dim);
    const unsigned int n = fe.n_dofs_per_cell(), nq = quadrature.size();
    FullMatrix<double> cell_matrix(n, n);
    Vector<double> cell_rhs(n);
    std::vector<types::global_dof_index> dofs(n);
    std::vector<Tensor<1, dim>> u_q(nq);
    std::vector<Tensor<2, dim>> grad_u(nq);
    std::vector<double> div_u(nq), p_q(nq);
    std::vector<Vector<double>> f_q(nq, Vector<double>(dim));
    std::vector<Tensor<1, dim>> phi(n);
    std::vector<Tensor<2, dim>> grad_phi(n);
    std::vector<SymmetricTensor<2, dim>> eps_phi(n);
    std::vector<double> div_phi(n), psi(n);
    const double eps = 1e-8 / nu;
    matrix = 0;
    rhs = 0;
    for (const auto &cell : dh.active_cell_iterators())
      {
        fv.reinit(cell);
        cell_matrix = 0;
        cell_rhs = 0;
        fv[velocity].get_function_values(u, u_q);
        fv[velocity].get_function_gradients(u, grad_u);
        fv[velocity].get_function_divergences(u, div_u);
        if (flow)
          fv[pressure].get_function_values(u, p_q);
        forcing->vector_value_list(fv.get_quadrature_points(), f_q);
        for (unsigned int q = 0; q < nq; ++q)
          {
            const double jxw = fv.JxW(q);
            Tensor<1, dim> f;
            for (int d = 0; d < dim; ++d)
              f[d] = f_q[q][d];
            for (unsigned int i = 0; i < n; ++i)
              {
                phi[i] = fv[velocity].value(i, q);
                grad_phi[i] = fv[velocity].gradient(i, q);
                eps_phi[i] = fv[velocity].symmetric_gradient(i, q);
                div_phi[i] = fv[velocity].divergence(i, q);
                psi[i] = flow ? fv[pressure].value(i, q) : 0.0;
              }
            const SymmetricTensor<2, dim> eps_u = symmetrize(grad_u[q]);
            const Tensor<1, dim> convection = grad_u[q] * u_q[q];  // (u . grad) u
            for (unsigned int i = 0; i < n; ++i)
              {
                double residual;
                if (flow)
                  residual = nu * scalar_product(grad_u[q], grad_phi[i]) - p_q[q] * div_phi[i] -
                             psi[i] * div_u[q] - eps * p_q[q] * psi[i] - f * phi[i] +
                             (convective ? convection * phi[i] : 0.0);
                else
                  residual = 2 * mu * (eps_u * eps_phi[i]) + lambda * div_u[q] * div_phi[i] - f * phi[i];
                cell_rhs(i) -= residual * jxw;
                for (unsigned int j = 0; j < n; ++j)
                  {
                    double a;
                    if (flow)
                      {
                        a = nu * scalar_product(grad_phi[j], grad_phi[i]) - psi[j] * div_phi[i] -
                            psi[i] * div_phi[j] - eps * psi[j] * psi[i];
                        if (convective)
                          a += (grad_phi[j] * u_q[q] + (newton ? grad_u[q] * phi[j] : Tensor<1, dim>())) * phi[i];
                      }
                    else
                      a = 2 * mu * (eps_phi[j] * eps_phi[i]) + lambda * div_phi[j] * div_phi[i];
                    cell_matrix(i, j) += a * jxw;
                  }
              }
          }
        cell->get_dof_indices(dofs);
        homogeneous.distribute_local_to_global(cell_matrix, cell_rhs, dofs, matrix, rhs);
      }
  }

  template <int dim>
  int VectorSolver<dim>::run()
  {
    dh.distribute_dofs(fe);
    constrain(homogeneous, true);
    DynamicSparsityPattern dsp(dh.n_dofs());
    DoFTools::make_sparsity_pattern(dh, dsp, homogeneous, false);
    pattern.copy_from(dsp);
    matrix.reinit(pattern);
    for (auto *v : {&u, &rhs, &delta})
      v->reinit(dh.n_dofs());
    AffineConstraints<double> data;
    constrain(data, false);
    data.distribute(u);  // boundary values in place; the increments keep them

    SparseDirectUMFPACK direct;
    converged = !convective;
    for (unsigned int iteration = 0; iteration < 40; ++iteration)
      {
        assemble(iteration >= PICARD_ITERATIONS);
        direct.initialize(matrix);
        direct.vmult(delta, rhs);
        homogeneous.distribute(delta);
        u += delta;
        ++newton_iterations;
        if (!convective)
          break;
        // 1e-8: the eps term makes the system ill-conditioned (~1/eps), increments below
        // that are round-off
        if (delta.linfty_norm() <= 1e-8 * std::max(1.0, u.linfty_norm()))
          {
            converged = true;
            break;
          }
      }

    const Grid grid = eval_grid(c);
    const auto values = sample(dh, mapping, u, grid, 2 * h);
    std::vector<double> magnitude(grid.size());
    for (std::size_t k = 0; k < grid.size(); ++k)
      {
        double sum = 0;
        for (int d = 0; d < dim; ++d)
          sum += values[d][k] * values[d][k];
        magnitude[k] = std::sqrt(sum);  // NaN outside the domain stays NaN
      }
    json info;
    info["mesh_resolution"] = int(std::round(domain.size / h));
    info["element_degree"] = fe.base_element(0).degree;
    info["elements"] = flow ? "Q2-Q1 Taylor-Hood" : "Q" + std::to_string(fe.base_element(0).degree) + " vector";
    info["num_dofs"] = dh.n_dofs();
    info["num_cells"] = tria.n_active_cells();
    info["newton_iterations"] = newton_iterations;
    info["solver"] = "UMFPACK";
    info["converged"] = converged;
    write_outputs(c, magnitude, info);
    return converged ? 0 : 2;
  }

  inline int run_vector(const Case &c)
  {
    if (c.dim == 2)
      return VectorSolver<2>(c).run();
    return VectorSolver<3>(c).run();
  }
}  // namespace pdebench
