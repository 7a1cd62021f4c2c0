// Shared code of the deal.II oracle (deal.II 9.4.1, C++17): reading the case, case
// expressions as muparser functions, meshing the domain templates with boundary tags,
// sampling a finite element field on the evaluation grid, writing the outputs.
//
// Domains: GridGenerator where it has the shape (rectangles, L-shape, disk, annulus,
// eccentric annulus, square with a hole); the others are meshed by the gmsh executable
// from a .geo script written here (OpenCASCADE kernel, all-quadrilateral mesh) and read
// with GridIn. Boundary parts are found from face centres, so every mesh gets the same
// tags as the Python oracles (x_min ... z_max, hole, holes, inner, outer, arc,
// edge_start, edge_end; "boundary" is all of them).
#pragma once

#include <deal.II/base/function_parser.h>
#include <deal.II/base/point.h>
#include <deal.II/dofs/dof_handler.h>
#include <deal.II/fe/fe.h>
#include <deal.II/fe/mapping_q.h>
#include <deal.II/grid/grid_generator.h>
#include <deal.II/grid/grid_in.h>
#include <deal.II/grid/grid_tools.h>
#include <deal.II/grid/grid_tools_cache.h>
#include <deal.II/grid/manifold_lib.h>
#include <deal.II/grid/tria.h>
#include <deal.II/lac/vector.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace pdebench
{
  using namespace dealii;
  using json = nlohmann::json;
  using Clock = std::chrono::steady_clock;

  struct Case
  {
    json spec;  // the case_spec object
    std::string family;
    std::string outdir;
    int dim = 2;
    bool transient = false;
    double t0 = 0, t_end = 0;
    Clock::time_point started = Clock::now();
    // calibration runs only: the record's settings (calibration_config.json beside the
    // case); 0 means the oracle's own
    bool calibration = false;
    int degree = 0, cells_per_side = 0;
    double dt = 0, extent = 1;  // extent: the largest side of the domain's bounds

    int degree_or(int own) const { return degree > 0 ? degree : own; }
    double time_step_or(double own) const { return dt > 0 ? dt : own; }
    // the mesh criterion is a cell diameter: cells_per_side cells along the largest side
    double mesh_size_or(double own) const
    {
      return cells_per_side > 0 ? std::sqrt(double(dim)) * extent / cells_per_side : own;
    }
  };

  inline void read_calibration_setting(Case &c, const std::string &case_file)
  {
    const auto slash = case_file.find_last_of('/');
    std::ifstream in((slash == std::string::npos ? std::string() : case_file.substr(0, slash + 1)) +
                     "calibration_config.json");
    if (!in)
      return;  // an ordinary run
    const json setting = json::parse(in);
    c.calibration = true;
    c.degree = setting.value("element_degree", 0);
    c.cells_per_side = setting.value("cells_per_side", 0);
    c.dt = setting.value("dt", 0.0);
    if (c.spec["domain"].contains("bounds"))
      for (const auto &range : c.spec["domain"]["bounds"])
        c.extent = std::max(c.extent, range[1].get<double>() - range[0].get<double>());
  }

  inline Case read_case(int argc, char **argv)
  {
    if (argc < 3)
      throw std::runtime_error("usage: solver case_spec.json OUTDIR");
    std::ifstream in(argv[1]);
    if (!in)
      throw std::runtime_error(std::string("cannot open ") + argv[1]);
    const json view = json::parse(in);
    Case c;
    c.spec = view.contains("case_spec") ? view["case_spec"] : view;
    c.outdir = argv[2];
    c.family = c.spec["pde"]["type"].get<std::string>();
    c.dim = c.spec["eval_grid"].contains("nz") ? 3 : 2;
    if (c.spec["pde"].contains("time") && !c.spec["pde"]["time"].is_null())
      {
        c.transient = true;
        c.t0 = c.spec["pde"]["time"].value("t0", 0.0);
        c.t_end = c.spec["pde"]["time"]["t_end"].get<double>();
      }
    read_calibration_setting(c, argv[1]);
    return c;
  }

  // ---- expressions ----

  // sympy prints powers as **; muparser wants ^
  inline std::string to_muparser(const json &value)
  {
    std::string s = value.is_string() ? value.get<std::string>() : std::to_string(value.get<double>());
    for (std::size_t at = s.find("**"); at != std::string::npos; at = s.find("**", at))
      s.replace(at, 2, "^");
    return s;
  }

  inline std::vector<std::string> expressions(const json &value)
  {
    std::vector<std::string> out;
    if (value.is_array())
      for (const auto &v : value)
        out.push_back(to_muparser(v));
    else
      out.push_back(to_muparser(value));
    return out;
  }

  inline std::string coordinate_names(int dim)
  {
    return dim == 2 ? "x,y" : "x,y,z";
  }

  // a (vector) function of x, y[, z] and, if time_dependent, t
  template <int dim>
  std::unique_ptr<FunctionParser<dim>> parse(const json &value, bool time_dependent)
  {
    const auto exprs = expressions(value);
    auto f = std::make_unique<FunctionParser<dim>>(exprs.size());
    std::map<std::string, double> constants{{"pi", M_PI}, {"E", std::exp(1.0)}};
    f->initialize(coordinate_names(dim) + (time_dependent ? ",t" : ""), exprs, constants, time_dependent);
    return f;
  }

  // a function of x, y[, z] and u: muparser's time variable stands for u (deal.II 9.4
  // has no FunctionParser<dim + 1> for dim = 3)
  template <int dim>
  struct FieldFunction
  {
    mutable FunctionParser<dim> parser;
    explicit FieldFunction(const json &value)
    {
      std::map<std::string, double> constants{{"pi", M_PI}, {"E", std::exp(1.0)}};
      parser.initialize(coordinate_names(dim) + ",u", to_muparser(value), constants, true);
    }
    double value(const Point<dim> &p, double u) const
    {
      parser.set_time(u);
      return parser.value(p);
    }
    double derivative(const Point<dim> &p, double u) const
    {
      const double h = 1e-6 * (1.0 + std::abs(u));
      return (value(p, u + h) - value(p, u - h)) / (2 * h);
    }
  };

  // ---- domains ----

  const std::map<std::string, types::boundary_id> TAG_IDS = {
    {"x_min", 0}, {"x_max", 1}, {"y_min", 2}, {"y_max", 3}, {"z_min", 4}, {"z_max", 5},
    {"hole", 6}, {"holes", 7}, {"inner", 8}, {"outer", 9}, {"arc", 10}, {"edge_start", 11},
    {"edge_end", 12}, {"boundary", 13}};

  struct Circle
  {
    Point<2> center;
    double radius;
  };

  inline Circle circle_param(const json &p, const Point<2> &center, double radius)
  {
    Circle c{center, radius};
    if (p.contains("center"))
      c.center = Point<2>(p["center"][0].get<double>(), p["center"][1].get<double>());
    if (p.contains("radius"))
      c.radius = p["radius"].get<double>();
    return c;
  }

  template <int dim>
  struct Domain
  {
    std::string kind;
    json params;
    std::vector<double> box;  // x0, x1, y0, y1[, z0, z1]: the bounding box
    std::vector<Circle> circles;  // curved boundary parts (for manifolds and tags)
    std::set<types::boundary_id> used_ids;
    double size = 1;

    std::string tag(const Point<dim> &c, double tol) const;
  };

  template <int dim>
  std::string Domain<dim>::tag(const Point<dim> &c, double tol) const
  {
    const std::vector<std::string> sides = {"x_min", "x_max", "y_min", "y_max", "z_min", "z_max"};
    if (kind == "unit_square" || kind == "periodic_square" || kind == "unit_cube" || kind == "square_with_hole" ||
        kind == "multi_hole")
      {
        for (int d = 0; d < dim; ++d)
          for (int s = 0; s < 2; ++s)
            if (std::abs(c[d] - box[2 * d + s]) < tol)
              return sides[2 * d + s];
        return kind == "multi_hole" ? "holes" : "hole";
      }
    if (kind == "annulus" || kind == "eccentric_annulus")
      {
        const Circle &inner = circles[1];
        Point<2> q(c[0], c[1]);
        return std::abs(q.distance(inner.center) - inner.radius) < 10 * tol ? "inner" : "outer";
      }
    if (kind == "sector")
      {
        const Circle &arc = circles[0];
        Point<2> q(c[0], c[1]);
        if (std::abs(q.distance(arc.center) - arc.radius) < 10 * tol)
          return "arc";
        return std::abs(q[1] - arc.center[1]) < tol ? "edge_start" : "edge_end";
      }
    return "boundary";
  }

  inline std::vector<double> bounds_of(const json &params, int dim)
  {
    std::vector<double> box;
    for (int d = 0; d < dim; ++d)
      {
        box.push_back(0.0);
        box.push_back(1.0);
      }
    for (const char *key : {"bounds", "outer"})
      if (params.contains(key) && params[key].is_array())
        {
          const json &b = params[key];
          box.clear();
          if (b[0].is_array())  // [[x0, x1], [y0, y1]]
            for (const auto &pair : b)
              {
                box.push_back(pair[0].get<double>());
                box.push_back(pair[1].get<double>());
              }
          else
            for (const auto &v : b)
              box.push_back(v.get<double>());
        }
    return box;
  }

  inline std::string fmt(double v)
  {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
  }

  // gmsh .geo (OpenCASCADE) of the templates GridGenerator has no shape for
  inline std::string geo_script(const std::string &kind, const json &p, std::vector<Circle> &circles)
  {
    std::ostringstream g;
    g << "SetFactory(\"OpenCASCADE\");\n";
    auto polygon = [&](const json &vertices) {
      const std::size_t n = vertices.size();
      for (std::size_t i = 0; i < n; ++i)
        g << "Point(" << i + 1 << ") = {" << fmt(vertices[i][0].get<double>()) << ", "
          << fmt(vertices[i][1].get<double>()) << ", 0};\n";
      for (std::size_t i = 0; i < n; ++i)
        g << "Line(" << i + 1 << ") = {" << i + 1 << ", " << (i + 1) % n + 1 << "};\n";
      g << "Curve Loop(1) = {";
      for (std::size_t i = 0; i < n; ++i)
        g << (i ? ", " : "") << i + 1;
      g << "};\nPlane Surface(1) = {1};\n";
    };
    auto rect = [&](int id, const json &r) {
      const double x0 = r[0], x1 = r[1], y0 = r[2], y1 = r[3];
      g << "Rectangle(" << id << ") = {" << fmt(x0) << ", " << fmt(y0) << ", 0, " << fmt(x1 - x0) << ", "
        << fmt(y1 - y0) << "};\n";
    };
    auto disk = [&](int id, const Circle &c) {
      g << "Disk(" << id << ") = {" << fmt(c.center[0]) << ", " << fmt(c.center[1]) << ", 0, " << fmt(c.radius)
        << "};\n";
      circles.push_back(c);
    };
    if (kind == "t_junction")
      {
        // the outline as one polygon: OpenCASCADE's union of two rectangles that only touch
        // leaves a seam that gmsh meshes as two unconnected pieces
        const json bar = p.value("bar", json::array({0.0, 1.0, 0.8, 1.0}));
        const json stem = p.value("stem", json::array({0.4, 0.6, 0.0, 0.8}));
        const double s0 = stem[0], s1 = stem[1], sy = stem[2], b0 = bar[0], b1 = bar[1], by0 = bar[2], by1 = bar[3];
        polygon(json::array({{s0, sy}, {s1, sy}, {s1, by0}, {b1, by0}, {b1, by1}, {b0, by1}, {b0, by0}, {s0, by0}}));
      }
    else if (kind == "dumbbell")
      {
        disk(1, circle_param(p.value("left", json::object()), Point<2>(0.25, 0.5), 0.25));
        disk(2, circle_param(p.value("right", json::object()), Point<2>(0.75, 0.5), 0.25));
        rect(3, p.value("bridge", json::array({0.25, 0.75, 0.4, 0.6})));
        g << "BooleanUnion{ Surface{1}; Delete; }{ Surface{2}; Surface{3}; Delete; }\n";
      }
    else if (kind == "multi_hole")
      {
        rect(1, p.value("outer", json::array({0.0, 1.0, 0.0, 1.0})));
        int id = 2;
        for (const auto &h : p["holes"])
          disk(id++, circle_param(h, Point<2>(0.5, 0.5), 0.1));
        g << "BooleanDifference{ Surface{1}; Delete; }{ Surface{2:" << id - 1 << "}; Delete; }\n";
      }
    else if (kind == "sector")
      {
        const Circle c = circle_param(p, Point<2>(0, 0), 1.0);
        const double a = p.value("angle_deg", 90.0) * M_PI / 180;
        circles.push_back(c);
        g << "Point(1) = {" << fmt(c.center[0]) << ", " << fmt(c.center[1]) << ", 0};\n"
          << "Point(2) = {" << fmt(c.center[0] + c.radius) << ", " << fmt(c.center[1]) << ", 0};\n"
          << "Point(3) = {" << fmt(c.center[0] + c.radius * std::cos(a)) << ", "
          << fmt(c.center[1] + c.radius * std::sin(a)) << ", 0};\n"
          << "Line(1) = {1, 2};\nCircle(2) = {2, 1, 3};\nLine(3) = {3, 1};\n"
          << "Curve Loop(1) = {1, 2, 3};\nPlane Surface(1) = {1};\n";
      }
    else if (p.contains("vertices"))  // star, gear, l_shape with other corners
      polygon(p["vertices"]);
    else
      throw std::runtime_error("no mesh recipe for domain " + kind);
    return g.str();
  }

  template <int dim>
  void mesh_with_gmsh(Triangulation<dim> &tria, const Domain<dim> &domain, double h, const std::string &outdir,
                      std::vector<Circle> &circles)
  {
    const std::string geo = outdir + "/domain.geo", msh = outdir + "/domain.msh";
    std::ofstream(geo) << geo_script(domain.kind, domain.params, circles)
                       // all quadrilaterals: recombined, then subdivided (which halves h). Algorithm 8
                       // (frontal-Delaunay for quads) crashes in Debian's gmsh 4.8.4
                       << "Mesh.CharacteristicLengthMax = " << fmt(2 * h) << ";\n"
                       << "Mesh.RecombineAll = 1;\nMesh.Algorithm = 6;\nMesh.SubdivisionAlgorithm = 1;\n"
                       << "Mesh.MshFileVersion = 2.2;\n"
                       // only the cells are written: no lines left inside a union, tags come later
                       << "Physical Surface(1) = Surface{:};\n";
    const std::string command = "gmsh " + geo + " -2 -o " + msh + " -v 1 > " + outdir + "/gmsh.log 2>&1";
    if (std::system(command.c_str()) != 0)
      throw std::runtime_error("gmsh failed: see gmsh.log");
    GridIn<dim> in;
    in.attach_triangulation(tria);
    std::ifstream file(msh);
    in.read_msh(file);
  }

  // the mesh of the case's domain, refined to cell diameter <= h, faces tagged
  template <int dim>
  Domain<dim> make_mesh(Triangulation<dim> &tria, const Case &c, double h)
  {
    Domain<dim> d;
    d.kind = c.spec["domain"]["type"].get<std::string>();
    d.params = c.spec["domain"].value("geometry_params", json::object());
    if (d.params.is_null())
      d.params = json::object();
    const json &p = d.params;
    if (d.kind == "unit_square" || d.kind == "periodic_square" || d.kind == "unit_cube")
      {
        d.box = bounds_of(p, dim);
        Point<dim> lo, hi;
        std::vector<unsigned int> reps(dim);
        for (int i = 0; i < dim; ++i)
          {
            lo[i] = d.box[2 * i];
            hi[i] = d.box[2 * i + 1];
            reps[i] = std::max(1, int(std::ceil((hi[i] - lo[i]) / h * std::sqrt(double(dim)))));
          }
        GridGenerator::subdivided_hyper_rectangle(tria, reps, lo, hi);
      }
    else if constexpr (dim == 2)
      {
        std::vector<Circle> &circles = d.circles;
        if (d.kind == "circle")
          {
            const Circle k = circle_param(p, Point<2>(0.5, 0.5), 0.5);
            circles.push_back(k);
            GridGenerator::hyper_ball(tria, k.center, k.radius);
          }
        else if (d.kind == "annulus")
          {
            const Point<2> center = p.contains("center") ? Point<2>(p["center"][0].get<double>(), p["center"][1].get<double>()) : Point<2>(.5, .5);
            const double ri = p.value("inner_radius", 0.25), ro = p.value("outer_radius", 0.5);
            circles = {Circle{center, ro}, Circle{center, ri}};
            GridGenerator::hyper_shell(tria, center, ri, ro, 16);
          }
        else if (d.kind == "eccentric_annulus")
          {
            const Circle outer = circle_param(p.value("outer", json::object()), Point<2>(.5, .5), .5);
            const Circle inner = circle_param(p.value("inner", json::object()), Point<2>(.65, .5), .2);
            circles = {outer, inner};
            GridGenerator::eccentric_hyper_shell(tria, inner.center, outer.center, inner.radius, outer.radius, 16);
          }
        else if (d.kind == "square_with_hole" && p.value("hole", json::object()).contains("radius"))
          {
            d.box = bounds_of(p, 2);
            const Circle hole = circle_param(p["hole"], Point<2>(.5, .5), .2);
            circles.push_back(hole);
            const double half = std::min({hole.center[0] - d.box[0], d.box[1] - hole.center[0],
                                          hole.center[1] - d.box[2], d.box[3] - hole.center[1]});
            GridGenerator::plate_with_a_hole(tria, hole.radius, half, hole.center[1] - half - d.box[2],
                                             d.box[3] - hole.center[1] - half, hole.center[0] - half - d.box[0],
                                             d.box[1] - hole.center[0] - half, hole.center);
          }
        else if (d.kind == "l_shape" && (!p.contains("vertices") ||
                                         p["vertices"] == json::parse("[[0,0],[1,0],[1,0.5],[0.5,0.5],[0.5,1],[0,1]]")))
          GridGenerator::hyper_L(tria, 0.0, 1.0);
        else
          {
            if (d.kind == "multi_hole")
              d.box = bounds_of(p, 2);
            mesh_with_gmsh(tria, d, h, c.outdir, circles);
            // curved parts of gmsh meshes follow their circles when refined and mapped
            for (const auto &cell : tria.active_cell_iterators())
              for (const auto f : cell->face_indices())
                if (cell->face(f)->at_boundary())
                  for (std::size_t k = 0; k < circles.size(); ++k)
                    {
                      bool on = true;
                      for (const auto v : cell->face(f)->vertex_indices())
                        on = on && std::abs(Point<2>(cell->face(f)->vertex(v)).distance(circles[k].center) -
                                            circles[k].radius) < 1e-6;
                      if (on)
                        cell->face(f)->set_manifold_id(10 + k);
                    }
            for (std::size_t k = 0; k < circles.size(); ++k)
              tria.set_manifold(10 + k, SphericalManifold<2>(circles[k].center));
          }
      }
    else
      throw std::runtime_error("3-D domain " + d.kind + " is not supported");
    // refine until the mean cell (side sqrt(volume / cells)) has diameter <= h: generators
    // grade their cells (small ones at a hole), so the largest cell would over-refine
    auto mean_diameter = [&]() {
      return std::pow(GridTools::volume(tria) / tria.n_active_cells(), 1.0 / dim) * std::sqrt(double(dim));
    };
    while (mean_diameter() > h * 1.0001)
      tria.refine_global(1);

    // bounding box and tags
    const auto bbox = GridTools::compute_bounding_box(tria);
    if (d.box.empty())
      for (int i = 0; i < dim; ++i)
        {
          d.box.push_back(bbox.lower_bound(i));
          d.box.push_back(bbox.upper_bound(i));
        }
    d.size = 0;
    for (int i = 0; i < dim; ++i)
      d.size = std::max(d.size, d.box[2 * i + 1] - d.box[2 * i]);
    const double tol = 1e-8 * d.size;
    for (const auto &cell : tria.active_cell_iterators())
      for (const auto f : cell->face_indices())
        if (cell->face(f)->at_boundary())
          {
            const auto id = TAG_IDS.at(d.tag(cell->face(f)->center(), tol));
            cell->face(f)->set_boundary_id(id);
            d.used_ids.insert(id);
          }
    return d;
  }

  // boundary ids named by a bc's "on" (a tag, a list of tags, or "boundary")
  template <int dim>
  std::set<types::boundary_id> boundary_ids(const Domain<dim> &d, const json &on)
  {
    std::set<types::boundary_id> ids;
    std::vector<std::string> names;
    if (on.is_array())
      for (const auto &n : on)
        names.push_back(n.get<std::string>());
    else
      names.push_back(on.get<std::string>());
    for (const auto &name : names)
      {
        if (name == "boundary" || name == "all")
          return d.used_ids;
        auto it = TAG_IDS.find(name);
        if (it == TAG_IDS.end())
          throw std::runtime_error("unknown boundary tag " + name);
        ids.insert(it->second);
      }
    return ids;
  }

  // ---- output ----

  struct Grid
  {
    int nx = 0, ny = 0, nz = 1;
    std::vector<double> bbox;
    template <int dim>
    Point<dim> point(int i, int j, int k) const
    {
      Point<dim> p;
      p[0] = nx > 1 ? bbox[0] + i * (bbox[1] - bbox[0]) / (nx - 1) : bbox[0];
      p[1] = ny > 1 ? bbox[2] + j * (bbox[3] - bbox[2]) / (ny - 1) : bbox[2];
      if constexpr (dim == 3)
        p[2] = nz > 1 ? bbox[4] + k * (bbox[5] - bbox[4]) / (nz - 1) : bbox[4];
      return p;
    }
    std::size_t size() const { return std::size_t(nx) * ny * nz; }
  };

  inline Grid eval_grid(const Case &c)
  {
    const json &g = c.spec["eval_grid"];
    Grid grid;
    grid.nx = g["nx"];
    grid.ny = g["ny"];
    if (g.contains("nz"))
      grid.nz = g["nz"];
    grid.bbox = g["bbox"].get<std::vector<double>>();
    return grid;
  }

  // values of the FE field's components at every grid point (row-major, x fastest).
  // Cells are found through the rtree of cell bounding boxes. A point in no cell but
  // within `reach` of the mesh (the mesh of a curved domain is only close to it) takes
  // the value at the nearest point of the mesh; the others are NaN (outside the domain).
  template <int dim>
  std::vector<std::vector<double>> sample(const DoFHandler<dim> &dh, const Mapping<dim> &mapping,
                                          const Vector<double> &u, const Grid &grid, double reach)
  {
    namespace bgi = boost::geometry::index;
    using CellIt = typename Triangulation<dim>::active_cell_iterator;
    const auto &tria = dh.get_triangulation();
    const auto &fe = dh.get_fe();
    const unsigned int nc = fe.n_components();
    GridTools::Cache<dim> cache(tria, mapping);
    const auto &boxes = cache.get_cell_bounding_boxes_rtree();
    const auto &vertices = cache.get_used_vertices_rtree();
    const auto &vertex_cells = cache.get_vertex_to_cell_map();
    double largest_cell = 0;
    for (const auto &cell : tria.active_cell_iterators())
      largest_cell = std::max(largest_cell, cell->diameter());
    std::vector<std::vector<double>> out(nc, std::vector<double>(grid.size(), std::nan("")));
    std::vector<types::global_dof_index> dofs(fe.n_dofs_per_cell());

    auto evaluate = [&](const CellIt &cell, const Point<dim> &unit, std::size_t at) {
      typename DoFHandler<dim>::active_cell_iterator dof_cell(&tria, cell->level(), cell->index(), &dh);
      dof_cell->get_dof_indices(dofs);
      for (unsigned int comp = 0; comp < nc; ++comp)
        {
          double value = 0;
          for (unsigned int i = 0; i < dofs.size(); ++i)
            if (fe.system_to_component_index(i).first == comp)
              value += u[dofs[i]] * fe.shape_value_component(i, unit, comp);
          out[comp][at] = value;
        }
    };
    // (distance to the cell's image of the projected unit point, projected unit point)
    auto locate = [&](const CellIt &cell, const Point<dim> &p) {
      try
        {
          const Point<dim> unit = mapping.transform_real_to_unit_cell(cell, p);
          if (GeometryInfo<dim>::is_inside_unit_cell(unit, 1e-10))
            return std::make_pair(0.0, GeometryInfo<dim>::project_to_unit_cell(unit));
          const Point<dim> projected = GeometryInfo<dim>::project_to_unit_cell(unit);
          return std::make_pair(mapping.transform_unit_to_real_cell(cell, projected).distance(p), projected);
        }
      catch (...)
        {
          return std::make_pair(std::numeric_limits<double>::max(), Point<dim>());
        }
    };

    std::vector<std::pair<BoundingBox<dim>, CellIt>> hits;
    std::vector<std::pair<Point<dim>, unsigned int>> nearest;
    for (int k = 0; k < grid.nz; ++k)
      for (int j = 0; j < grid.ny; ++j)
        for (int i = 0; i < grid.nx; ++i)
          {
            const std::size_t at = (std::size_t(k) * grid.ny + j) * grid.nx + i;
            const Point<dim> p = grid.point<dim>(i, j, k);
            nearest.clear();
            vertices.query(bgi::nearest(p, 1), std::back_inserter(nearest));
            if (nearest.empty() || nearest[0].first.distance(p) > reach + largest_cell)
              continue;  // far outside the mesh
            std::vector<CellIt> candidates;
            hits.clear();
            boxes.query(bgi::intersects(p), std::back_inserter(hits));
            for (const auto &hit : hits)
              candidates.push_back(hit.second);
            for (const auto &cell : vertex_cells[nearest[0].second])
              candidates.push_back(cell);
            double best = std::numeric_limits<double>::max();
            CellIt best_cell;
            Point<dim> best_unit;
            for (const auto &cell : candidates)
              {
                const auto [distance, unit] = locate(cell, p);
                if (distance < best)
                  {
                    best = distance;
                    best_cell = cell;
                    best_unit = unit;
                  }
                if (distance == 0.0)
                  break;
              }
            if (best < reach)
              evaluate(best_cell, best_unit, at);
          }
    return out;
  }

  inline void write_array(const std::string &path, const std::vector<double> &values)
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(values.data()), std::streamsize(values.size() * sizeof(double)));
    if (!out)
      throw std::runtime_error("cannot write " + path);
  }

  inline void write_outputs(const Case &c, const std::vector<double> &field, const json &solver_info)
  {
    write_array(c.outdir + "/solution_grid.bin", field);
    json meta;
    meta["wall_time_sec"] = std::chrono::duration<double>(Clock::now() - c.started).count();
    meta["status"] = "success";
    meta["solver_info"] = solver_info;
    std::ofstream(c.outdir + "/meta.json") << meta.dump(1) << "\n";
  }

  inline int guarded_main(int argc, char **argv, int (*run)(const Case &))
  {
    try
      {
        return run(read_case(argc, argv));
      }
    catch (std::exception &exc)
      {
        std::cerr << "error: " << exc.what() << std::endl;
        return 1;
      }
  }
}  // namespace pdebench
