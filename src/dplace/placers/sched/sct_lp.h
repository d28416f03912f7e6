// The linear-programming relaxation behind m-sct's favourite children (Hanen and Munier, "An
// approximation algorithm for scheduling dependent tasks on m processors with small communication
// delays", Discrete Applied Math. 2001; used by Baechi's m-SCT, Jeon et al., SoCC 2020).
//
// Variables: x_e in [0, 1] per edge e = (i, j) (0: j is i's favourite child and runs right after
// i on i's device, so the edge costs no communication), s_i >= 0 per task, and the makespan w.
//   minimise w
//   s_j >= s_i + p_i + c_e x_e                 for every edge e = (i, j)
//   sum over out-edges of i of x_e >= outdeg(i) - 1   (at most one favourite child)
//   sum over in-edges of j of x_e >= indeg(j) - 1     (at most one favourite parent)
//   w >= s_i + p_i                             for every task without successors
// Solved with Clp (COIN-OR, the LP solver of CBC). Rounding: x_e < 0.5 marks a favourite edge; the
// constraints make that at most one per task in each direction.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dplace {

struct SctEdge {
  uint32_t from = 0;
  uint32_t to = 0;
  double comm_s = 0;  // communication delay when the two tasks are on different devices
};

struct SctLpProblem {
  std::vector<double> duration_s;  // per task
  std::vector<SctEdge> edges;      // REQUIRES: acyclic, no duplicate (from, to) pair
};

struct SctLpSolution {
  bool optimal = false;
  bool time_limit_reached = false;  // stopped by solve_sct_lp's time_limit_s
  std::string status;               // Clp's status in words when not optimal
  double makespan_s = 0;            // the relaxation's w
  std::vector<double> x;            // per edge
};

// Stops after time_limit_s seconds of wall time (then not optimal, status "time limit reached").
// Clp runs in a child process, stopped when its presolve, which does not check the clock, is still
// running at overrun_deadline(time_limit_s) (core/run_forked.h): then time_limit_reached and no x.
// When that process cannot start (no pipe, no fork), not optimal, no x, and the status says why.
// REQUIRES: time_limit_s > 0.
SctLpSolution solve_sct_lp(const SctLpProblem& problem, double time_limit_s);

// Per task, the index of its favourite child or -1: edges with x < 0.5, keeping the smallest x
// when rounding would give a task two favourites in either direction.
std::vector<int64_t> favourite_children(const SctLpProblem& problem, const SctLpSolution& solution);

}  // namespace dplace
