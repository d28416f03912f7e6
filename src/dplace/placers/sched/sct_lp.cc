#include "dplace/placers/sched/sct_lp.h"

#include <ClpSimplex.hpp>
#include <ClpSolve.hpp>
#include <CoinPackedMatrix.hpp>
#include <algorithm>
#include <numeric>

#include "dplace/core/error.h"
#include "dplace/core/run_forked.h"

namespace dplace {

namespace {

// Clp in this process; its presolve does not check the time limit.
SctLpSolution solve_here(const SctLpProblem& problem, double time_limit_s) {
  const int n = static_cast<int>(problem.duration_s.size());
  const int m = static_cast<int>(problem.edges.size());
  const int num_cols = m + n + 1;  // x_e, s_i, w
  const int w_col = m + n;
  auto s_col = [m](uint32_t task) { return m + static_cast<int>(task); };

  std::vector<int> rows, cols;
  std::vector<double> values, row_lb, row_ub;
  auto add = [&](int r, int c, double v) {
    rows.push_back(r);
    cols.push_back(c);
    values.push_back(v);
  };
  const double inf = COIN_DBL_MAX;
  int row = 0;
  std::vector<std::vector<int>> out_edges(n), in_edges(n);
  for (int e = 0; e < m; ++e) {
    const SctEdge& edge = problem.edges[e];
    DPLACE_CHECK(int(edge.from) < n && int(edge.to) < n);
    out_edges[edge.from].push_back(e);
    in_edges[edge.to].push_back(e);
    // s_j - s_i - c_e x_e >= p_i
    add(row, s_col(edge.to), 1.0);
    add(row, s_col(edge.from), -1.0);
    if (edge.comm_s != 0) add(row, e, -edge.comm_s);
    row_lb.push_back(problem.duration_s[edge.from]);
    row_ub.push_back(inf);
    ++row;
  }
  for (const auto* lists : {&out_edges, &in_edges}) {
    for (int i = 0; i < n; ++i) {
      const std::vector<int>& es = (*lists)[i];
      if (es.size() < 2) continue;
      for (int e : es) add(row, e, 1.0);
      row_lb.push_back(double(es.size()) - 1.0);
      row_ub.push_back(inf);
      ++row;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!out_edges[i].empty()) continue;
    add(row, w_col, 1.0);  // w - s_i >= p_i
    add(row, s_col(uint32_t(i)), -1.0);
    row_lb.push_back(problem.duration_s[i]);
    row_ub.push_back(inf);
    ++row;
  }

  std::vector<double> col_lb(num_cols, 0.0), col_ub(num_cols, inf), objective(num_cols, 0.0);
  std::fill(col_ub.begin(), col_ub.begin() + m, 1.0);
  objective[w_col] = 1.0;

  CoinPackedMatrix matrix(/*colordered=*/false, rows.data(), cols.data(), values.data(),
                          static_cast<CoinBigIndex>(values.size()));
  matrix.setDimensions(row, num_cols);
  ClpSimplex model;
  model.setLogLevel(0);
  model.loadProblem(matrix, col_lb.data(), col_ub.data(), objective.data(), row_lb.data(),
                    row_ub.data());
  model.setOptimizationDirection(1.0);
  model.setMaximumWallSeconds(time_limit_s);
  ClpSolve solve;  // dual simplex after presolve: the fastest of Clp's methods on these LPs
  solve.setSolveType(ClpSolve::useDual);
  solve.setPresolveType(ClpSolve::presolveOn);
  model.initialSolve(solve);

  SctLpSolution out;
  out.optimal = model.isProvenOptimal();
  out.time_limit_reached = !out.optimal && model.hitMaximumIterations();
  if (!out.optimal) {
    out.status = model.isProvenPrimalInfeasible() ? "primal infeasible"
                 : model.isProvenDualInfeasible() ? "unbounded"
                 : out.time_limit_reached         ? "time limit reached"
                                                  : "not solved";
  }
  const double* solution = model.primalColumnSolution();
  out.x.assign(solution, solution + m);
  out.makespan_s = solution[w_col];
  return out;
}

std::string to_bytes(const SctLpSolution& s) {
  ByteWriter out;
  out.put(s.optimal);
  out.put(s.time_limit_reached);
  out.put(s.status);
  out.put(s.makespan_s);
  out.put(s.x);
  return out.take();
}

SctLpSolution from_bytes(const std::string& bytes) {
  SctLpSolution s;
  ByteReader in(bytes);
  in.get(s.optimal);
  in.get(s.time_limit_reached);
  in.get(s.status);
  in.get(s.makespan_s);
  in.get(s.x);
  DPLACE_CHECK(in.at_end()) << "LP solution of the wrong size from the solver's process";
  return s;
}

}  // namespace

SctLpSolution solve_sct_lp(const SctLpProblem& problem, double time_limit_s) {
  // Clp's presolve does not check the clock: on a 200,000-op chain it ran 139 s past a 10 s
  // limit. So Clp runs in a child process, stopped when it is still running a grace period later.
  const ForkedRun run = run_forked([&] { return to_bytes(solve_here(problem, time_limit_s)); },
                                   overrun_deadline(time_limit_s));
  switch (run.outcome) {
    case ForkedRun::Outcome::kFinished:
      return from_bytes(run.output);
    case ForkedRun::Outcome::kTimedOut: {
      SctLpSolution stopped;
      stopped.time_limit_reached = true;
      stopped.status = "time limit reached; Clp was stopped inside its presolve";
      return stopped;
    }
    case ForkedRun::Outcome::kNotStarted: {
      // Solving here instead would lose the hard limit (the presolve ran for minutes).
      SctLpSolution not_started;
      not_started.status = "Clp's process could not start: " + run.problem;
      return not_started;
    }
    case ForkedRun::Outcome::kFailed:
      break;
  }
  // The child died: solve here, so that a failure shows as it happens.
  return solve_here(problem, time_limit_s);
}

std::vector<int64_t> favourite_children(const SctLpProblem& problem,
                                        const SctLpSolution& solution) {
  const size_t n = problem.duration_s.size();
  std::vector<int64_t> child(n, -1), parent(n, -1);
  std::vector<size_t> order(problem.edges.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return solution.x[a] < solution.x[b]; });
  for (size_t e : order) {
    if (solution.x[e] >= 0.5) break;
    const SctEdge& edge = problem.edges[e];
    if (child[edge.from] >= 0 || parent[edge.to] >= 0) continue;
    child[edge.from] = edge.to;
    parent[edge.to] = edge.from;
  }
  return child;
}

}  // namespace dplace
