// A small mixed-integer program builder solved with COIN-OR CBC (through its C interface), for
// the pipeline integer programs. Minimisation only.
//
// Thread safety: a MilpModel is a plain value; solve_milp is re-entrant (one CBC model per call).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dplace {

class MilpModel {
 public:
  enum class Sense : char { kLessEqual = 'L', kGreaterEqual = 'G', kEqual = 'E' };

  // Returns the column index.
  int add_column(double lower, double upper, double objective, bool integer);
  void add_row(std::span<const int> columns, std::span<const double> coefficients, Sense sense,
               double rhs);
  // Convenience for short rows.
  void add_row(std::initializer_list<std::pair<int, double>> terms, Sense sense, double rhs);

  size_t num_columns() const { return lower_.size(); }
  size_t num_rows() const { return row_rhs_.size(); }
  size_t num_integers() const;

 private:
  friend struct MilpSolver;
  std::vector<double> lower_, upper_, objective_;
  std::vector<uint8_t> integer_;
  std::vector<size_t> row_start_ = {0};
  std::vector<int> row_columns_;
  std::vector<double> row_coefficients_;
  std::vector<char> row_sense_;
  std::vector<double> row_rhs_;
};

struct MilpOptions {
  double time_limit_s = 60;  // Default: 60.
  int threads = 1;           // Default: 1.
  // A feasible assignment of the integer columns (index, value); may be empty.
  std::vector<std::pair<int, double>> start;
};

struct MilpResult {
  enum class Status { kOptimal, kFeasible, kInfeasible, kNoSolution };
  Status status = Status::kNoSolution;
  std::vector<double> values;  // column values when a solution exists
  double objective = 0;
  double best_bound = 0;  // proven lower bound on the optimum
  double seconds = 0;
  int64_t nodes = 0;
  // CBC was still running well past options.time_limit_s (inside an LP solve, where it does not
  // check its clock) and was stopped: no solution and no bound (status kNoSolution).
  bool stopped_past_limit = false;
  // Why CBC's process could not start (no pipe, no fork: "cannot fork: ..."), else empty; then
  // there is no solution (status kNoSolution): CBC is not run in dplace's own process, where its
  // limit could not be enforced.
  std::string not_started;
};

// CBC runs in a child process, stopped when it is still running at overrun_deadline(time_limit_s)
// (core/run_forked.h): CBC does not check its clock inside an LP solve.
MilpResult solve_milp(const MilpModel& model, const MilpOptions& options);

// "CBC was stopped after S s: it ran past its L s limit inside an LP solve, where it does not
// check the clock", for a result with stopped_past_limit.
std::string milp_overrun_note(double time_limit_s, double seconds);
// Why a solve returned no solution (r.values empty, not infeasible): its process could not start,
// stopped past its limit, at its limit, or ended early (e.g. a program with nothing to decide)
// after r.seconds.
std::string milp_no_solution_note(const MilpResult& r, double time_limit_s);

}  // namespace dplace
