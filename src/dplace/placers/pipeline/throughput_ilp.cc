#include "dplace/placers/pipeline/throughput_ilp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "dplace/core/error.h"
#include "dplace/placers/pipeline/milp.h"
#include "dplace/placers/pipeline/units.h"

namespace dplace {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct ClassData {
  size_t num_classes = 0;
  std::vector<uint32_t> class_of_node;
  std::vector<std::vector<double>> time;  // [class][type]
  std::vector<double> size;
  struct Tensor {
    uint32_t producer;
    std::vector<uint32_t> consumers;  // distinct classes != producer
    std::vector<double> comm;         // per type
  };
  std::vector<Tensor> tensors;
};

ClassData class_data(const PipelineProblem& p) {
  const ColourClasses cc = colour_classes(p);
  ClassData d;
  d.num_classes = cc.num_classes;
  d.class_of_node = cc.class_of_node;
  d.time.assign(d.num_classes, std::vector<double>(p.types.size(), 0.0));
  d.size.assign(d.num_classes, 0.0);
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const uint32_t c = cc.class_of_node[i];
    for (size_t t = 0; t < p.types.size(); ++t) d.time[c][t] += p.nodes[i].time_s[t];
    d.size[c] += p.nodes[i].size_bytes;
  }
  for (const PipelineTensor& t : p.tensors) {
    ClassData::Tensor ct;
    ct.producer = cc.class_of_node[t.producer];
    for (uint32_t q : t.consumers) {
      const uint32_t c = cc.class_of_node[q];
      if (c != ct.producer) ct.consumers.push_back(c);
    }
    std::sort(ct.consumers.begin(), ct.consumers.end());
    ct.consumers.erase(std::unique(ct.consumers.begin(), ct.consumers.end()), ct.consumers.end());
    if (ct.consumers.empty()) continue;
    ct.comm = t.comm_s;
    d.tensors.push_back(std::move(ct));
  }
  return d;
}

}  // namespace

ThroughputIlpResult solve_throughput_ilp(const PipelineProblem& p,
                                         const ThroughputIlpOptions& options) {
  ThroughputIlpResult result;
  const ClassData cd = class_data(p);
  const int num_devices = p.num_devices();
  const size_t C = cd.num_classes;
  std::vector<int> type_of(num_devices), index_in_type(num_devices);
  for (int d = 0; d < num_devices; ++d) {
    type_of[d] = p.type_of_device(d);
    index_in_type[d] = d - p.first_device_of_type(type_of[d]);
  }

  // Simple lower bound for M.
  double total_work = 0;
  double largest = 0;
  for (size_t c = 0; c < C; ++c) {
    double best = kInf;
    for (size_t t = 0; t < p.types.size(); ++t) {
      if (p.types[t].count > 0) best = std::min(best, cd.time[c][t]);
    }
    if (best < kInf) {
      total_work += best;
      largest = std::max(largest, best);
    }
  }
  const double lower = std::max(largest, num_devices > 0 ? total_work / num_devices : 0.0);

  MilpModel model;
  const int M = model.add_column(lower, kInf, 1.0, false);
  std::vector<int> x(C * num_devices, -1);
  for (size_t c = 0; c < C; ++c) {
    for (int d = 0; d < num_devices; ++d) {
      const int t = type_of[d];
      const bool allowed = cd.time[c][t] < kInf && cd.size[c] <= p.types[t].memory_cap_bytes &&
                           static_cast<size_t>(index_in_type[d]) <= c;
      if (allowed) x[c * num_devices + d] = model.add_column(0, 1, 0, true);
    }
  }
  // Assignment.
  for (size_t c = 0; c < C; ++c) {
    std::vector<int> cols;
    for (int d = 0; d < num_devices; ++d) {
      if (x[c * num_devices + d] >= 0) cols.push_back(x[c * num_devices + d]);
    }
    if (cols.empty()) {
      result.note = "a colour class fits on no device (memory caps or allowed devices)";
      return result;
    }
    const std::vector<double> ones(cols.size(), 1.0);
    model.add_row(cols, ones, MilpModel::Sense::kEqual, 1.0);
  }
  // Crossing indicators and loads.
  std::vector<std::vector<int>> load_cols(num_devices);
  std::vector<std::vector<double>> load_coefs(num_devices);
  for (int d = 0; d < num_devices; ++d) {
    const int t = type_of[d];
    for (size_t c = 0; c < C; ++c) {
      const int col = x[c * num_devices + d];
      if (col >= 0) {
        load_cols[d].push_back(col);
        load_coefs[d].push_back(cd.time[c][t]);
      }
    }
    if (!p.types[t].pays_communication) continue;
    for (const ClassData::Tensor& e : cd.tensors) {
      if (e.comm[t] == 0) continue;
      const int xp = x[e.producer * num_devices + d];
      bool any = xp >= 0;
      for (uint32_t q : e.consumers) any = any || x[q * num_devices + d] >= 0;
      if (!any) continue;  // nothing of this tensor can be on d
      const int y = model.add_column(0, 1, 0, false);
      for (uint32_t q : e.consumers) {
        const int xq = x[q * num_devices + d];
        if (xp < 0 && xq < 0) continue;
        // y >= xp - xq and y >= xq - xp (absent columns are 0).
        if (xp >= 0 && xq >= 0) {
          model.add_row({{y, 1.0}, {xp, -1.0}, {xq, 1.0}}, MilpModel::Sense::kGreaterEqual, 0.0);
          model.add_row({{y, 1.0}, {xq, -1.0}, {xp, 1.0}}, MilpModel::Sense::kGreaterEqual, 0.0);
        } else {
          const int present = xp >= 0 ? xp : xq;
          model.add_row({{y, 1.0}, {present, -1.0}}, MilpModel::Sense::kGreaterEqual, 0.0);
        }
      }
      load_cols[d].push_back(y);
      load_coefs[d].push_back(e.comm[t]);
    }
  }
  for (int d = 0; d < num_devices; ++d) {
    load_cols[d].push_back(M);
    load_coefs[d].push_back(-1.0);
    model.add_row(load_cols[d], load_coefs[d], MilpModel::Sense::kLessEqual, 0.0);
    const double cap = p.types[type_of[d]].memory_cap_bytes;
    if (std::isfinite(cap)) {
      std::vector<int> cols;
      std::vector<double> coefs;
      for (size_t c = 0; c < C; ++c) {
        const int col = x[c * num_devices + d];
        if (col >= 0 && cd.size[c] > 0) {
          cols.push_back(col);
          coefs.push_back(cd.size[c]);
        }
      }
      if (!cols.empty()) model.add_row(cols, coefs, MilpModel::Sense::kLessEqual, cap);
    }
  }
  result.columns = model.num_columns();
  result.rows = model.num_rows();

  MilpOptions milp;
  milp.time_limit_s = options.time_limit_s;
  milp.threads = options.threads;
  if (!options.warm_start.empty()) {
    // Relabel the devices of each type by their smallest class, as the symmetry breaking wants.
    std::vector<int> device_of_class(C, -1);
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      device_of_class[cd.class_of_node[i]] = options.warm_start[i];
    }
    std::vector<int> relabel(num_devices, -1);
    std::vector<int> next(p.types.size(), 0);
    for (size_t c = 0; c < C; ++c) {
      const int d = device_of_class[c];
      if (relabel[d] < 0) {
        const int t = type_of[d];
        relabel[d] = p.first_device_of_type(t) + next[t]++;
      }
    }
    bool ok = true;
    for (size_t c = 0; c < C && ok; ++c) {
      const int col = x[c * num_devices + relabel[device_of_class[c]]];
      if (col < 0) {
        ok = false;
      } else {
        milp.start.emplace_back(col, 1.0);
      }
    }
    if (!ok) milp.start.clear();
  }
  const MilpResult r = solve_milp(model, milp);
  result.seconds = r.seconds;
  result.best_bound_s = std::max(lower, r.best_bound);
  if (r.status == MilpResult::Status::kInfeasible) {
    result.note = "the integer program is infeasible (memory caps)";
    return result;
  }
  if (r.values.empty()) {
    result.note = milp_no_solution_note(r, options.time_limit_s);
    return result;
  }
  result.feasible = true;
  result.optimal = r.status == MilpResult::Status::kOptimal;
  result.objective_s = r.objective;
  if (result.optimal) result.best_bound_s = r.objective;
  result.device_of_node.assign(p.nodes.size(), -1);
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const uint32_t c = cd.class_of_node[i];
    int best_d = -1;
    double best_v = 0.5;
    for (int d = 0; d < num_devices; ++d) {
      const int col = x[c * num_devices + d];
      if (col >= 0 && r.values[col] > best_v) {
        best_v = r.values[col];
        best_d = d;
      }
    }
    DPLACE_CHECK(best_d >= 0) << "integer solution leaves a class unassigned";
    result.device_of_node[i] = best_d;
  }
  return result;
}

}  // namespace dplace
