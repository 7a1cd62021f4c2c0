// deal.II oracle for the scalar families (one program, the family read from the case):
//
//   poisson               -div(kappa grad u) = f
//   heat                  u_t - div(kappa grad u) = f
//   helmholtz             -lap(u) - k^2 u = f
//   convection_diffusion  [u_t] - epsilon lap(u) + beta . grad(u) = f   (SUPG where Pe_h > 1)
//   reaction_diffusion    u_t - epsilon lap(u) + R(u) = f                (Newton)
//
// Q2 elements (calibration runs: the record's degree, mesh and dt), a degree-2 mapping (curved boundaries follow their manifolds), UMFPACK.
// Every (sub)step solves for an increment with homogeneous constraints: linear problems
// take exactly one, nonlinear ones iterate with the Jacobian of the step's first iterate
// (a chord method: the mass term dominates it at these time steps). The factorization is
// reused while the step's theta and dt stay the same. Coefficients and forcing are
// evaluated once per quadrature point and time (muparser is the bottleneck otherwise). Time: theta scheme, the first step as 4 implicit
// Euler sub-steps (damps the start-up ringing of Crank-Nicolson), then Crank-Nicolson.
// Natural data: Neumann g = c du/dn, Robin g = c du/dn + alpha u (c: the flux coefficient).
#pragma once

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
  constexpr int STARTUP_SUBSTEPS = 4;
  // the strong oracle steps as the DOLFINx oracle does (its references are what both are
  // measured against): dt at most 0.005, at least 10 steps; calibration runs keep the
  // grid their baselines were measured with (the record's dt, else 0.01; at least 2 steps)
  constexpr double TARGET_DT = 0.005, TARGET_DT_CALIBRATION = 0.01;
  constexpr int MIN_STEPS = 10, MIN_STEPS_CALIBRATION = 2;

  // a number given as a number or as an expression string ("20", "0.5*2")
  inline double constant(const json &value)
  {
    if (value.is_number())
      return value.get<double>();
    FunctionParser<1> f;
    f.initialize("x", to_muparser(value), {{"pi", M_PI}, {"E", std::exp(1.0)}});
    return f.value(Point<1>());
  }

  template <int dim>
  class ScalarSolver
  {
  public:
    explicit ScalarSolver(const Case &c);
    int run();

  private:
    void setup();
    void constrain(AffineConstraints<double> &constraints, double t, bool homogeneous) const;
    void assemble(double theta, double inv_dt, double t_old, double t_new, bool with_matrix);
    void step(double theta, double dt, double t_old, double t_new);
    const std::vector<double> &forcing_at(double t);

    const Case &c;
    const json &pde, &bc;
    double h;
    Triangulation<dim> tria;
    Domain<dim> domain;
    FE_Q<dim> fe;
    MappingQCache<dim> mapping;  // curved cells' support points computed once, not per reinit
    DoFHandler<dim> dh;

    std::unique_ptr<FunctionParser<dim>> flux, forcing, dirichlet, robin, robin_alpha;
    std::vector<std::unique_ptr<FunctionParser<dim>>> neumann;  // bc.neumann: one entry, or a list of them
    std::map<types::boundary_id, FunctionParser<dim> *> neumann_on;  // each boundary's flux
    std::unique_ptr<FieldFunction<dim>> reaction;
    Tensor<1, dim> beta;
    double linear_reaction = 0;  // -k^2 for Helmholtz
    bool supg = false;
    std::set<types::boundary_id> dirichlet_ids, neumann_ids, robin_ids;
    std::vector<unsigned int> periodic_directions;

    AffineConstraints<double> homogeneous;
    SparsityPattern pattern;
    SparseMatrix<double> jacobian;
    SparseDirectUMFPACK direct;
    std::pair<double, double> factorized_for{-1, -1};
    QGauss<dim> quadrature;
    std::vector<Point<dim>> points;  // quadrature points of all cells, in loop order
    std::vector<double> flux_values;
    std::map<double, std::vector<double>> forcing_values;
    Vector<double> u, u_old, rhs, delta;
    unsigned int steps = 0, newton_iterations = 0, factorizations = 0;
    bool converged = true;
  };

  // the strong oracle's own cell size; Helmholtz in 2-D at least 14 P2 cells per wavelength
  // (the fixed 0.035 left k = 20 nine, and errors 10-15 x the calibration baseline's, over
  // tau_acc: measured; 14 is a little finer than the baselines' 12)
  template <int dim>
  double own_cell_size(const Case &c)
  {
    const double h = dim == 2 ? 0.035 : 0.17;
    if (dim != 2 || c.family != "helmholtz")
      return h;
    return std::min(h, 2 * M_PI / (14 * constant(c.spec["pde"]["params"]["k"])));
  }

  template <int dim>
  ScalarSolver<dim>::ScalarSolver(const Case &c)
    : c(c), pde(c.spec["pde"]), bc(c.spec["bc"]), h(c.mesh_size_or(own_cell_size<dim>(c))), fe(c.degree_or(2)), mapping(2), dh(tria)
    , quadrature(c.degree_or(2) + 1)
  {
    domain = make_mesh(tria, c, h);
    mapping.initialize(MappingQ<dim>(2), tria);
    const json &params = pde.value("params", json::object());
    const std::string flux_name = c.family == "convection_diffusion" || c.family == "reaction_diffusion" ?
                                    "epsilon" : "kappa";
    flux = parse<dim>(params.value(flux_name, json("1")), false);
    forcing = parse<dim>(pde.contains("forcing") ? pde["forcing"]["value"] : json("0"), true);
    if (c.family == "helmholtz")
      linear_reaction = -std::pow(constant(params["k"]), 2);
    if (c.family == "convection_diffusion")
      {
        for (int d = 0; d < dim; ++d)
          beta[d] = constant(params["beta"][d]);
        supg = true;
      }
    if (c.family == "reaction_diffusion" && params.contains("reaction"))
      reaction = std::make_unique<FieldFunction<dim>>(params["reaction"]);
    if (bc.contains("dirichlet"))
      {
        dirichlet = parse<dim>(bc["dirichlet"]["value"], true);
        dirichlet_ids = boundary_ids(domain, bc["dirichlet"]["on"]);
      }
    if (bc.contains("neumann"))
      for (const auto &entry : bc["neumann"].is_array() ? bc["neumann"] : json::array({bc["neumann"]}))
        {
          neumann.push_back(parse<dim>(entry["value"], true));
          for (const auto id : boundary_ids(domain, entry["on"]))
            {
              neumann_ids.insert(id);
              neumann_on[id] = neumann.back().get();
            }
        }
    if (bc.contains("robin"))
      {
        robin = parse<dim>(bc["robin"]["value"], true);
        robin_alpha = parse<dim>(bc["robin"].value("alpha", json("1")), false);
        robin_ids = boundary_ids(domain, bc["robin"]["on"]);
      }
    if (bc.contains("periodic"))
      for (const auto &direction : bc["periodic"]["directions"])
        periodic_directions.push_back(direction.get<std::string>()[0] - 'x');
    if (bc.contains("laplacian"))
      throw std::runtime_error("bc.laplacian belongs to the biharmonic oracle");
  }

  template <int dim>
  void ScalarSolver<dim>::constrain(AffineConstraints<double> &constraints, double t, bool homogeneous_values) const
  {
    constraints.clear();
    for (const unsigned int d : periodic_directions)
      DoFTools::make_periodicity_constraints(dh, 2 * d, 2 * d + 1, d, constraints);
    if (dirichlet)
      {
        dirichlet->set_time(t);
        std::map<types::global_dof_index, double> values;
        const Functions::ZeroFunction<dim> zero;
        const Function<dim> *data = homogeneous_values ? static_cast<const Function<dim> *>(&zero) : dirichlet.get();
        for (const auto id : dirichlet_ids)
          VectorTools::interpolate_boundary_values(mapping, dh, id, *data, values);
        for (const auto &[dof, value] : values)
          if (!constraints.is_constrained(dof))
            {
              constraints.add_line(dof);
              constraints.set_inhomogeneity(dof, value);
            }
      }
    constraints.close();
  }

  template <int dim>
  void ScalarSolver<dim>::setup()
  {
    dh.distribute_dofs(fe);
    constrain(homogeneous, c.t0, true);
    DynamicSparsityPattern dsp(dh.n_dofs());
    DoFTools::make_sparsity_pattern(dh, dsp, homogeneous, false);
    pattern.copy_from(dsp);
    jacobian.reinit(pattern);
    for (auto *v : {&u, &u_old, &rhs, &delta})
      v->reinit(dh.n_dofs());
    FEValues<dim> fv(mapping, fe, quadrature, update_quadrature_points);
    for (const auto &cell : dh.active_cell_iterators())
      {
        fv.reinit(cell);
        for (const auto &x : fv.get_quadrature_points())
          {
            points.push_back(x);
            flux_values.push_back(flux->value(x));
          }
      }
  }

  template <int dim>
  const std::vector<double> &ScalarSolver<dim>::forcing_at(double t)
  {
    auto found = forcing_values.find(t);
    if (found != forcing_values.end())
      return found->second;
    if (forcing_values.size() >= 3)  // time only moves forward
      forcing_values.erase(forcing_values.begin());
    forcing->set_time(t);
    std::vector<double> values(points.size());
    for (std::size_t i = 0; i < points.size(); ++i)
      values[i] = forcing->value(points[i]);
    return forcing_values[t] = std::move(values);
  }

  // rhs = -F(u) and, with_matrix, the Jacobian dF/du of the step's residual
  //   F = M (u - u_old) inv_dt + theta [A(u) - f(t_new)] + (1 - theta) [A(u_old) - f(t_old)]
  template <int dim>
  void ScalarSolver<dim>::assemble(double theta, double inv_dt, double t_old, double t_new, bool with_matrix)
  {
    const QGauss<dim - 1> face_quadrature(fe.degree + 1);
    FEValues<dim> fv(mapping, fe, quadrature,
                     update_values | update_gradients | update_quadrature_points | update_JxW_values |
                       (supg ? update_hessians : update_default));
    FEFaceValues<dim> ffv(mapping, fe, face_quadrature, update_values | update_quadrature_points | update_JxW_values);
    const unsigned int n = fe.n_dofs_per_cell(), nq = quadrature.size();
    FullMatrix<double> cell_matrix(n, n);
    Vector<double> cell_rhs(n);
    std::vector<types::global_dof_index> dofs(n);
    std::vector<double> u_q(nq), uo_q(nq), lap_u(nq), lap_uo(nq);
    std::vector<Tensor<1, dim>> grad_u(nq), grad_uo(nq);
    std::vector<double> uf(face_quadrature.size()), uof(face_quadrature.size());
    const bool old_terms = theta < 1;
    if (with_matrix)
      jacobian = 0;
    rhs = 0;
    const double beta_norm = beta.norm();
    const std::vector<double> &f_new_values = forcing_at(t_new);
    const std::vector<double> &f_old_values = old_terms ? forcing_at(t_old) : f_new_values;
    std::size_t point_index = 0;

    for (const auto &cell : dh.active_cell_iterators())
      {
        fv.reinit(cell);
        cell_matrix = 0;
        cell_rhs = 0;
        fv.get_function_values(u, u_q);
        fv.get_function_gradients(u, grad_u);
        fv.get_function_values(u_old, uo_q);
        fv.get_function_gradients(u_old, grad_uo);
        if (supg)
          {
            fv.get_function_laplacians(u, lap_u);
            fv.get_function_laplacians(u_old, lap_uo);
          }
        const double cell_h = cell->diameter();
        for (unsigned int q = 0; q < nq; ++q, ++point_index)
          {
            const Point<dim> &x = points[point_index];
            const double k = flux_values[point_index], jxw = fv.JxW(q);
            const double f_new = f_new_values[point_index], f_old = old_terms ? f_old_values[point_index] : 0.0;
            double r_new = linear_reaction * u_q[q], dr = linear_reaction, r_old = linear_reaction * uo_q[q];
            if (reaction)
              {
                r_new += reaction->value(x, u_q[q]);
                dr += reaction->derivative(x, u_q[q]);
                if (old_terms)
                  r_old += reaction->value(x, uo_q[q]);
              }
            // SUPG weight tau beta.grad(v), tau = h / (2 |beta|) min(1, Pe_h / 3)
            double tau = 0;
            if (supg && beta_norm > 0)
              {
                const double peclet = beta_norm * cell_h / (2 * k);
                tau = cell_h / (2 * beta_norm) * std::min(1.0, peclet / 3);
              }
            const double strong = inv_dt * (u_q[q] - uo_q[q]) + theta * (beta * grad_u[q] - k * lap_u[q] - f_new) +
                                  (old_terms ? (1 - theta) * (beta * grad_uo[q] - k * lap_uo[q] - f_old) : 0.0);
            for (unsigned int i = 0; i < n; ++i)
              {
                const double phi_i = fv.shape_value(i, q);
                const Tensor<1, dim> grad_i = fv.shape_grad(i, q);
                const double w_i = tau * (beta * grad_i);
                double F = inv_dt * (u_q[q] - uo_q[q]) * phi_i +
                           theta * (k * grad_u[q] * grad_i + (beta * grad_u[q] + r_new - f_new) * phi_i);
                if (old_terms)
                  F += (1 - theta) * (k * grad_uo[q] * grad_i + (beta * grad_uo[q] + r_old - f_old) * phi_i);
                F += strong * w_i;
                cell_rhs(i) -= F * jxw;
                if (with_matrix)
                  for (unsigned int j = 0; j < n; ++j)
                    {
                      const double phi_j = fv.shape_value(j, q);
                      const Tensor<1, dim> grad_j = fv.shape_grad(j, q);
                      double J = inv_dt * phi_j * phi_i +
                                 theta * (k * grad_j * grad_i + (beta * grad_j + dr * phi_j) * phi_i);
                      if (tau > 0)
                        J += (inv_dt * phi_j + theta * (beta * grad_j - k * trace(fv.shape_hessian(j, q)))) * w_i;
                      cell_matrix(i, j) += J * jxw;
                    }
              }
          }
        // natural boundary data
        if (!neumann_ids.empty() || !robin_ids.empty())
          for (const auto f : cell->face_indices())
            {
              if (!cell->face(f)->at_boundary())
                continue;
              const auto id = cell->face(f)->boundary_id();
              const bool is_neumann = neumann_ids.count(id), is_robin = robin_ids.count(id);
              if (!is_neumann && !is_robin)
                continue;
              ffv.reinit(cell, f);
              FunctionParser<dim> &g = is_robin ? *robin : *neumann_on.at(id);
              ffv.get_function_values(u, uf);
              ffv.get_function_values(u_old, uof);
              for (unsigned int q = 0; q < face_quadrature.size(); ++q)
                {
                  const Point<dim> &x = ffv.quadrature_point(q);
                  g.set_time(t_new);
                  const double g_new = g.value(x);
                  g.set_time(t_old);
                  const double g_old = old_terms ? g.value(x) : 0.0;
                  const double alpha = is_robin ? robin_alpha->value(x) : 0.0;
                  const double F_q = theta * (alpha * uf[q] - g_new) + (old_terms ? (1 - theta) * (alpha * uof[q] - g_old) : 0.0);
                  for (unsigned int i = 0; i < n; ++i)
                    {
                      cell_rhs(i) -= F_q * ffv.shape_value(i, q) * ffv.JxW(q);
                      if (with_matrix && is_robin)
                        for (unsigned int j = 0; j < n; ++j)
                          cell_matrix(i, j) += theta * alpha * ffv.shape_value(j, q) * ffv.shape_value(i, q) * ffv.JxW(q);
                    }
                }
            }
        cell->get_dof_indices(dofs);
        if (with_matrix)
          homogeneous.distribute_local_to_global(cell_matrix, cell_rhs, dofs, jacobian, rhs);
        else
          homogeneous.distribute_local_to_global(cell_rhs, dofs, rhs);
      }
  }

  template <int dim>
  void ScalarSolver<dim>::step(double theta, double dt, double t_old, double t_new)
  {
    const double inv_dt = c.transient ? 1.0 / dt : 0.0;
    u = u_old;
    AffineConstraints<double> at_t_new;
    constrain(at_t_new, t_new, false);
    at_t_new.distribute(u);
    const bool nonlinear = static_cast<bool>(reaction);
    for (unsigned int iteration = 0; iteration < 60; ++iteration)
      {
        const bool refactor = factorized_for != std::make_pair(theta, dt);
        assemble(theta, inv_dt, t_old, t_new, refactor);
        if (refactor)
          {
            direct.initialize(jacobian);
            factorized_for = {theta, dt};
            ++factorizations;
          }
        direct.vmult(delta, rhs);
        homogeneous.distribute(delta);
        u += delta;
        ++newton_iterations;
        if (!nonlinear || delta.linfty_norm() <= 1e-10 * std::max(1.0, u.linfty_norm()))
          return;
      }
    converged = false;
  }

  template <int dim>
  int ScalarSolver<dim>::run()
  {
    setup();
    if (c.transient)
      {
        auto ic = parse<dim>(c.spec.contains("ic") ? c.spec["ic"]["value"] : json("0"), true);
        ic->set_time(c.t0);
        VectorTools::interpolate(mapping, dh, *ic, u_old);
        const double largest = c.time_step_or(c.calibration ? TARGET_DT_CALIBRATION : TARGET_DT);
        steps = std::max(c.calibration ? MIN_STEPS_CALIBRATION : MIN_STEPS,
                         int(std::ceil((c.t_end - c.t0) / largest - 1e-9)));
        const double dt = (c.t_end - c.t0) / steps, small = dt / STARTUP_SUBSTEPS;
        for (int k = 0; k < STARTUP_SUBSTEPS; ++k)
          {
            step(1.0, small, c.t0 + k * small, c.t0 + (k + 1) * small);
            u_old = u;
          }
        for (unsigned int s = 2; s <= steps; ++s)
          {
            step(0.5, dt, c.t0 + (s - 1) * dt, c.t0 + s * dt);
            u_old = u;
          }
      }
    else
      step(1.0, 1.0, 0.0, 0.0);

    const Grid grid = eval_grid(c);
    const auto values = sample(dh, mapping, u, grid, 2 * h);
    json info;
    info["mesh_resolution"] = int(std::round(domain.size / h));
    info["element_degree"] = fe.degree;
    info["num_dofs"] = dh.n_dofs();
    info["num_cells"] = tria.n_active_cells();
    info["num_time_steps"] = steps;
    info["newton_iterations"] = newton_iterations;
    info["factorizations"] = factorizations;
    info["solver"] = "UMFPACK";
    info["converged"] = converged;
    write_outputs(c, values[0], info);
    return converged ? 0 : 2;
  }

  inline int run_scalar(const Case &c)
  {
    if (c.dim == 2)
      return ScalarSolver<2>(c).run();
    return ScalarSolver<3>(c).run();
  }
}  // namespace pdebench
