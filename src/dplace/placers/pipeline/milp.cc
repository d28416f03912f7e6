#include "dplace/placers/pipeline/milp.h"

#include <Cbc_C_Interface.h>
#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>

#include "dplace/core/error.h"
#include "dplace/core/run_forked.h"

namespace dplace {

int MilpModel::add_column(double lower, double upper, double objective, bool integer) {
  lower_.push_back(lower);
  upper_.push_back(upper);
  objective_.push_back(objective);
  integer_.push_back(integer ? 1 : 0);
  return static_cast<int>(lower_.size() - 1);
}

void MilpModel::add_row(std::span<const int> columns, std::span<const double> coefficients,
                        Sense sense, double rhs) {
  DPLACE_CHECK(columns.size() == coefficients.size()) << "row size mismatch";
  for (size_t k = 0; k < columns.size(); ++k) {
    DPLACE_CHECK(columns[k] >= 0 && static_cast<size_t>(columns[k]) < lower_.size())
        << "row names an unknown column";
    if (coefficients[k] == 0) continue;
    row_columns_.push_back(columns[k]);
    row_coefficients_.push_back(coefficients[k]);
  }
  row_start_.push_back(row_columns_.size());
  row_sense_.push_back(static_cast<char>(sense));
  row_rhs_.push_back(rhs);
}

void MilpModel::add_row(std::initializer_list<std::pair<int, double>> terms, Sense sense,
                        double rhs) {
  std::vector<int> cols;
  std::vector<double> coefs;
  for (const auto& [c, a] : terms) {
    cols.push_back(c);
    coefs.push_back(a);
  }
  add_row(cols, coefs, sense, rhs);
}

size_t MilpModel::num_integers() const {
  return static_cast<size_t>(std::count(integer_.begin(), integer_.end(), 1));
}

struct MilpSolver {
  static MilpResult solve(const MilpModel& m, const MilpOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    const int ncols = static_cast<int>(m.lower_.size());
    const int nrows = static_cast<int>(m.row_rhs_.size());
    // Row-major -> column-major.
    std::vector<int> col_count(ncols + 1, 0);
    for (int c : m.row_columns_) ++col_count[c + 1];
    std::vector<CoinBigIndex> col_start(ncols + 1, 0);
    for (int c = 0; c < ncols; ++c) col_start[c + 1] = col_start[c] + col_count[c + 1];
    std::vector<int> row_index(m.row_columns_.size());
    std::vector<double> values(m.row_columns_.size());
    std::vector<CoinBigIndex> fill(col_start.begin(), col_start.end() - 1);
    for (int r = 0; r < nrows; ++r) {
      for (size_t k = m.row_start_[r]; k < m.row_start_[r + 1]; ++k) {
        const int c = m.row_columns_[k];
        row_index[fill[c]] = r;
        values[fill[c]] = m.row_coefficients_[k];
        ++fill[c];
      }
    }
    std::vector<double> row_lower(nrows), row_upper(nrows);
    for (int r = 0; r < nrows; ++r) {
      const double rhs = m.row_rhs_[r];
      switch (m.row_sense_[r]) {
        case 'L':
          row_lower[r] = -DBL_MAX;
          row_upper[r] = rhs;
          break;
        case 'G':
          row_lower[r] = rhs;
          row_upper[r] = DBL_MAX;
          break;
        default:
          row_lower[r] = rhs;
          row_upper[r] = rhs;
      }
    }
    std::vector<double> col_lower = m.lower_, col_upper = m.upper_;
    for (double& u : col_upper) {
      if (std::isinf(u)) u = DBL_MAX;
    }
    for (double& l : col_lower) {
      if (std::isinf(l)) l = -DBL_MAX;
    }

    Cbc_Model* model = Cbc_newModel();
    Cbc_loadProblem(model, ncols, nrows, col_start.data(), row_index.data(), values.data(),
                    col_lower.data(), col_upper.data(), m.objective_.data(), row_lower.data(),
                    row_upper.data());
    for (int c = 0; c < ncols; ++c) {
      if (m.integer_[c]) Cbc_setInteger(model, c);
    }
    Cbc_setObjSense(model, 1.0);
    Cbc_setLogLevel(model, 0);
    // Wall-clock limit: CBC measures CPU time unless timeMode is "elapsed".
    const double limit_s = std::max(0.1, options.time_limit_s);
    Cbc_setMaximumSeconds(model, limit_s);
    Cbc_setParameter(model, "timeMode", "elapsed");
    Cbc_setParameter(model, "sec", fmt::format("{}", limit_s).c_str());
    Cbc_setAllowableFractionGap(model, 1e-7);
    Cbc_setAllowableGap(model, 1e-9);
    if (options.threads > 1) {
      const std::string threads = std::to_string(options.threads);
      Cbc_setParameter(model, "threads", threads.c_str());
    }
    if (!options.start.empty()) {
      std::vector<int> idx;
      std::vector<double> val;
      for (const auto& [c, v] : options.start) {
        idx.push_back(c);
        val.push_back(v);
      }
      Cbc_setMIPStartI(model, static_cast<int>(idx.size()), idx.data(), val.data());
    }
    Cbc_solve(model);

    MilpResult result;
    const double* x = Cbc_bestSolution(model);
    if (Cbc_isProvenInfeasible(model)) {
      result.status = MilpResult::Status::kInfeasible;
    } else if (x != nullptr) {
      result.values.assign(x, x + ncols);
      result.objective = Cbc_getObjValue(model);
      result.status =
          Cbc_isProvenOptimal(model) ? MilpResult::Status::kOptimal : MilpResult::Status::kFeasible;
    }
    result.best_bound = Cbc_getBestPossibleObjValue(model);
    result.nodes = Cbc_getNodeCount(model);
    Cbc_deleteModel(model);
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }
};

namespace {

// A MilpResult through run_forked (the solver's values; `seconds` is the caller's).
std::string to_bytes(const MilpResult& r) {
  ByteWriter out;
  out.put(r.status);
  out.put(r.objective);
  out.put(r.best_bound);
  out.put(r.nodes);
  out.put(r.values);
  return out.take();
}

MilpResult from_bytes(const std::string& bytes) {
  MilpResult r;
  ByteReader in(bytes);
  in.get(r.status);
  in.get(r.objective);
  in.get(r.best_bound);
  in.get(r.nodes);
  in.get(r.values);
  DPLACE_CHECK(in.at_end()) << "MILP result of the wrong size from the solver's process";
  return r;
}

}  // namespace

MilpResult solve_milp(const MilpModel& model, const MilpOptions& options) {
  // CBC checks its limit between the steps of its search, not inside an LP solve: on a large
  // model its root LP alone ran for minutes past a 10-second limit. So CBC runs in a child
  // process, stopped when it is still running a grace period past its limit (milp.h).
  const auto start = std::chrono::steady_clock::now();
  const ForkedRun run = run_forked([&] { return to_bytes(MilpSolver::solve(model, options)); },
                                   overrun_deadline(std::max(0.1, options.time_limit_s)));
  MilpResult result;
  switch (run.outcome) {
    case ForkedRun::Outcome::kFinished:
      result = from_bytes(run.output);
      break;
    case ForkedRun::Outcome::kTimedOut:
      result.status = MilpResult::Status::kNoSolution;
      result.stopped_past_limit = true;
      break;
    case ForkedRun::Outcome::kNotStarted:
      // Solving here instead would lose the hard limit (the root LP ran for minutes).
      result.status = MilpResult::Status::kNoSolution;
      result.not_started = run.problem;
      break;
    case ForkedRun::Outcome::kFailed:
      // The child died: solve here, so that a failure shows as it happens.
      return MilpSolver::solve(model, options);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string milp_overrun_note(double time_limit_s, double seconds) {
  return fmt::format(
      "CBC was stopped after {:.1f} s: it ran past its {} s limit inside an LP solve, where it "
      "does not check the clock",
      seconds, time_limit_s);
}

std::string milp_no_solution_note(const MilpResult& r, double time_limit_s) {
  if (!r.not_started.empty()) return "CBC's process could not start: " + r.not_started;
  if (r.stopped_past_limit) return milp_overrun_note(time_limit_s, r.seconds);
  if (r.seconds >= 0.99 * time_limit_s) {
    return fmt::format("CBC found no solution within its {} s limit", time_limit_s);
  }
  return fmt::format("CBC ended without a solution after {:.3g} s", r.seconds);
}

}  // namespace dplace
