#include "dplace/placers/pipeline/latency.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <queue>

#include "dplace/core/error.h"
#include "dplace/placers/pipeline/milp.h"
#include "dplace/placers/pipeline/units.h"

namespace dplace {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int pool_type(const PipelineProblem& p) {
  for (size_t t = 0; t < p.types.size(); ++t) {
    if (!p.types[t].pays_communication && p.types[t].count > 0) return static_cast<int>(t);
  }
  return -1;
}

// Global indices of the devices that run subgraphs (types that pay communication).
std::vector<int> subgraph_devices(const PipelineProblem& p) {
  std::vector<int> out;
  for (int d = 0; d < p.num_devices(); ++d) {
    if (p.types[p.type_of_device(d)].pays_communication) out.push_back(d);
  }
  return out;
}

// Predecessor lists of nodes from the tensors.
std::vector<std::vector<uint32_t>> node_predecessors(const PipelineProblem& p) {
  std::vector<std::vector<uint32_t>> pred(p.nodes.size());
  for (const PipelineTensor& t : p.tensors) {
    for (uint32_t c : t.consumers) pred[c].push_back(t.producer);
  }
  for (auto& v : pred) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  return pred;
}

// Topological order of `n` vertices (Kahn, ties by index); empty if there is a cycle.
std::vector<uint32_t> topological(size_t n, const std::vector<std::vector<uint32_t>>& succ) {
  std::vector<uint32_t> indegree(n, 0);
  for (const auto& s : succ) {
    for (uint32_t v : s) ++indegree[v];
  }
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
  for (uint32_t v = 0; v < n; ++v) {
    if (indegree[v] == 0) ready.push(v);
  }
  std::vector<uint32_t> order;
  while (!ready.empty()) {
    const uint32_t v = ready.top();
    ready.pop();
    order.push_back(v);
    for (uint32_t w : succ[v]) {
      if (--indegree[w] == 0) ready.push(w);
    }
  }
  if (order.size() != n) order.clear();
  return order;
}

}  // namespace

LatencyEvaluation evaluate_latency(const PipelineProblem& p,
                                   const std::vector<int>& device_of_node) {
  const size_t n = p.nodes.size();
  const int num_devices = p.num_devices();
  DPLACE_CHECK(device_of_node.size() == n) << "assignment size mismatch";
  LatencyEvaluation ev;
  ev.finish_of_node_s.assign(n, 0.0);
  ev.start_s.assign(num_devices, 0.0);
  ev.finish_s.assign(num_devices, 0.0);
  const int pool = pool_type(p);

  // Blocks: one per subgraph device, one per pool node.
  std::vector<int> type_of(num_devices);
  for (int d = 0; d < num_devices; ++d) type_of[d] = p.type_of_device(d);
  std::vector<uint32_t> block_of(n);
  for (size_t i = 0; i < n; ++i) {
    const int d = device_of_node[i];
    if (p.types[type_of[d]].pays_communication) {
      block_of[i] = static_cast<uint32_t>(d);
    } else {
      block_of[i] = static_cast<uint32_t>(num_devices + i);
      if (pool < 0 || p.nodes[i].time_s[pool] == kInfiniteTime) {
        ev.problem = fmt::format("node '{}' may not run on the CPU pool", p.nodes[i].name);
        return ev;
      }
    }
  }
  const size_t num_blocks = num_devices + n;
  std::vector<std::vector<uint32_t>> block_succ(num_blocks);
  for (const PipelineTensor& t : p.tensors) {
    for (uint32_t c : t.consumers) {
      if (block_of[t.producer] != block_of[c]) {
        block_succ[block_of[t.producer]].push_back(block_of[c]);
      }
    }
  }
  const std::vector<uint32_t> order = topological(num_blocks, block_succ);
  if (order.empty()) {
    ev.problem = "the accelerator subgraphs depend on each other in a cycle (not contiguous)";
    return ev;
  }

  // Per device: nodes, entering and leaving tensors.
  std::vector<std::vector<uint32_t>> nodes_of_device(num_devices);
  for (size_t i = 0; i < n; ++i) {
    if (block_of[i] < static_cast<uint32_t>(num_devices)) {
      nodes_of_device[block_of[i]].push_back(static_cast<uint32_t>(i));
    }
  }
  std::vector<std::vector<uint32_t>> entering(num_devices);  // tensor indices
  std::vector<double> comm(num_devices, 0.0);
  std::vector<int> touched;
  for (size_t k = 0; k < p.tensors.size(); ++k) {
    const PipelineTensor& t = p.tensors[k];
    devices_of_tensor(t, device_of_node, touched);
    if (touched.size() < 2) continue;
    for (int d : touched) {
      if (!p.types[type_of[d]].pays_communication) continue;
      comm[d] += t.comm_s[type_of[d]];
      if (d != device_of_node[t.producer]) entering[d].push_back(static_cast<uint32_t>(k));
    }
  }
  const auto pred = node_predecessors(p);
  for (uint32_t b : order) {
    if (b >= static_cast<uint32_t>(num_devices)) {
      const uint32_t v = b - static_cast<uint32_t>(num_devices);
      if (block_of[v] != b) continue;  // v runs on an accelerator
      double ready = 0;
      for (uint32_t u : pred[v]) ready = std::max(ready, ev.finish_of_node_s[u]);
      ev.finish_of_node_s[v] = ready + p.nodes[v].time_s[pool];
      ev.latency_s = std::max(ev.latency_s, ev.finish_of_node_s[v]);
      continue;
    }
    const int d = static_cast<int>(b);
    if (nodes_of_device[d].empty()) continue;
    double start = 0;
    for (uint32_t k : entering[d]) {
      start = std::max(start, ev.finish_of_node_s[p.tensors[k].producer]);
    }
    double compute = 0;
    for (uint32_t v : nodes_of_device[d]) compute += p.nodes[v].time_s[type_of[d]];
    if (compute == kInfiniteTime) {
      ev.problem = fmt::format("a node on '{}' may not run there", p.device_name(d));
      return ev;
    }
    ev.start_s[d] = start;
    ev.finish_s[d] = start + compute + comm[d];
    for (uint32_t v : nodes_of_device[d]) ev.finish_of_node_s[v] = ev.finish_s[d];
    ev.latency_s = std::max(ev.latency_s, ev.finish_s[d]);
  }
  ev.valid = true;
  return ev;
}

double latency_lower_bound(const PipelineProblem& p) {
  // A path crosses blocks in order, and a subgraph lasts at least the times of the path's nodes
  // inside it, so the critical path with every node at its fastest time bounds the latency.
  const size_t n = p.nodes.size();
  const auto pred = node_predecessors(p);
  std::vector<std::vector<uint32_t>> succ(n);
  for (size_t v = 0; v < n; ++v) {
    for (uint32_t u : pred[v]) succ[u].push_back(static_cast<uint32_t>(v));
  }
  std::vector<double> finish(n, 0.0);
  double critical_path = 0;
  for (uint32_t v : topological(n, succ)) {
    double fastest = kInf;
    for (size_t t = 0; t < p.types.size(); ++t) {
      if (p.types[t].count > 0) fastest = std::min(fastest, p.nodes[v].time_s[t]);
    }
    double ready = 0;
    for (uint32_t u : pred[v]) ready = std::max(ready, finish[u]);
    finish[v] = ready + (fastest < kInf ? fastest : 0.0);
    critical_path = std::max(critical_path, finish[v]);
  }
  return critical_path;
}

LatencyResult latency_greedy(const PipelineProblem& p) {
  const auto start = std::chrono::steady_clock::now();
  LatencyResult result;
  // Colour classes fused into strongly connected blocks over all edges: the unit DAG of a copy
  // where every node counts as forward.
  PipelineProblem forward = p;
  for (PipelineNode& node : forward.nodes) node.backward = false;
  const UnitDag blocks = build_unit_dag(forward);
  const int pool = pool_type(p);
  const std::vector<int> accels = subgraph_devices(p);

  std::vector<int> device_of_block(blocks.num_units, -1);
  size_t next_accel = 0;
  // Depth-first order (a stack of ready blocks), like the reference greedy.
  const std::vector<uint32_t> order = depth_first_topological_order(blocks);
  size_t i = 0;
  auto fits_alone = [&](uint32_t b, int d) {
    const int t = p.type_of_device(d);
    return blocks.time_s[b][t] < kInf && blocks.size_bytes[b] <= p.types[t].memory_cap_bytes;
  };
  while (i < order.size()) {
    const uint32_t b = order[i];
    if (next_accel < accels.size() && fits_alone(b, accels[next_accel])) {
      const int d = accels[next_accel++];
      const int t = p.type_of_device(d);
      double used = 0;
      while (i < order.size()) {
        const uint32_t b2 = order[i];
        if (blocks.time_s[b2][t] == kInf ||
            used + blocks.size_bytes[b2] > p.types[t].memory_cap_bytes) {
          break;
        }
        used += blocks.size_bytes[b2];
        device_of_block[b2] = d;
        ++i;
      }
      continue;
    }
    if (pool < 0 || blocks.time_s[b][pool] == kInf) {
      result.note =
          fmt::format("greedy: block of node '{}' fits on no accelerator and not on a CPU",
                      p.nodes[blocks.nodes_of_unit[b].front()].name);
      return result;
    }
    device_of_block[b] = p.first_device_of_type(pool);
    ++i;
  }
  result.device_of_node.resize(p.nodes.size());
  for (size_t v = 0; v < p.nodes.size(); ++v) {
    result.device_of_node[v] = device_of_block[blocks.unit_of_node[v]];
  }
  const LatencyEvaluation ev = evaluate_latency(p, result.device_of_node);
  result.feasible = ev.valid;
  result.latency_s = ev.latency_s;
  result.best_bound_s = latency_lower_bound(p);
  if (!ev.valid) result.note = ev.problem;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

LatencyResult latency_ilp(const PipelineProblem& p, const LatencyIlpOptions& options) {
  LatencyResult result;
  const ColourClasses cc = colour_classes(p);
  const size_t C = cc.num_classes;
  const size_t n = p.nodes.size();
  const int pool = pool_type(p);
  const std::vector<int> accels = subgraph_devices(p);
  const size_t K = accels.size();
  std::vector<int> acc_type(K);
  for (size_t k = 0; k < K; ++k) acc_type[k] = p.type_of_device(accels[k]);

  std::vector<std::vector<double>> class_time(C, std::vector<double>(p.types.size(), 0.0));
  std::vector<double> class_size(C, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t t = 0; t < p.types.size(); ++t) {
      class_time[cc.class_of_node[i]][t] += p.nodes[i].time_s[t];
    }
    class_size[cc.class_of_node[i]] += p.nodes[i].size_bytes;
  }
  // Big-M: no event can happen later than every node on its slowest allowed type plus every
  // tensor paid twice.
  double big_m = 1.0;
  for (const PipelineNode& node : p.nodes) {
    double worst = 0;
    for (double t : node.time_s) {
      if (t < kInf) worst = std::max(worst, t);
    }
    big_m += worst;
  }
  for (const PipelineTensor& t : p.tensors) {
    double worst = 0;
    for (double c : t.comm_s) worst = std::max(worst, c);
    big_m += 2 * worst;
  }
  // With the greedy split's latency G as a cap on the objective (the program looks for splits
  // no worse than it), every finish time is at most G, so G serves as big-M: a much tighter
  // relaxation than the sum of all times.
  const LatencyResult greedy = latency_greedy(p);
  if (greedy.feasible) big_m = std::min(big_m, greedy.latency_s * (1 + 1e-6) + 1e-9);

  const double critical_path = latency_lower_bound(p);

  MilpModel model;
  using S = MilpModel::Sense;
  const int total = model.add_column(critical_path, greedy.feasible ? big_m : kInf, 1.0, false);
  std::vector<int> x0(C, -1);
  std::vector<int> x(C * K, -1);
  for (size_t c = 0; c < C; ++c) {
    if (pool >= 0 && class_time[c][pool] < kInf) x0[c] = model.add_column(0, 1, 0, true);
    for (size_t k = 0; k < K; ++k) {
      const int t = acc_type[k];
      if (class_time[c][t] < kInf && class_size[c] <= p.types[t].memory_cap_bytes) {
        x[c * K + k] = model.add_column(0, 1, 0, true);
      }
    }
    std::vector<int> cols;
    if (x0[c] >= 0) cols.push_back(x0[c]);
    for (size_t k = 0; k < K; ++k) {
      if (x[c * K + k] >= 0) cols.push_back(x[c * K + k]);
    }
    if (cols.empty()) {
      result.note = "a colour class fits on no accelerator and not on a CPU";
      return result;
    }
    model.add_row(cols, std::vector<double>(cols.size(), 1.0), S::kEqual, 1.0);
  }
  auto xk = [&](uint32_t c, size_t k) { return x[c * K + k]; };
  // Memory per accelerator.
  for (size_t k = 0; k < K; ++k) {
    const double cap = p.types[acc_type[k]].memory_cap_bytes;
    if (!std::isfinite(cap)) continue;
    std::vector<int> cols;
    std::vector<double> coefs;
    for (size_t c = 0; c < C; ++c) {
      if (xk(c, k) >= 0 && class_size[c] > 0) {
        cols.push_back(xk(c, k));
        coefs.push_back(class_size[c]);
      }
    }
    if (!cols.empty()) model.add_row(cols, coefs, S::kLessEqual, cap);
  }
  // Contiguity of each accelerator's subgraph (the paper's z variables) over the nodes' edges, a
  // node's x being its class's: over the edges between classes, a class around another node
  // ({1, 3} of the chain 1 -> 2 -> 3) would make a cycle and keep node 2 off every accelerator.
  std::vector<std::pair<uint32_t, uint32_t>> node_edges;
  for (const PipelineTensor& t : p.tensors) {
    for (uint32_t c : t.consumers) {
      if (c != t.producer) node_edges.emplace_back(t.producer, c);
    }
  }
  std::sort(node_edges.begin(), node_edges.end());
  node_edges.erase(std::unique(node_edges.begin(), node_edges.end()), node_edges.end());
  for (size_t k = 0; k < K; ++k) {
    std::vector<int> z(n);
    for (size_t v = 0; v < n; ++v) {
      z[v] = model.add_column(0, kInf, 0, false);
      const int xv = xk(cc.class_of_node[v], k);
      if (xv >= 0) model.add_row({{z[v], 1.0}, {xv, -1.0}}, S::kGreaterEqual, 0.0);
    }
    for (const auto& [a, b] : node_edges) {
      model.add_row({{z[b], 1.0}, {z[a], -1.0}}, S::kLessEqual, 0.0);
      const uint32_t ca = cc.class_of_node[a];
      const uint32_t cb = cc.class_of_node[b];
      if (ca == cb) continue;  // z_b <= x_b - x_a + 1 holds trivially
      // z_b <= x_b - x_a + 1
      std::vector<int> cols = {z[b]};
      std::vector<double> coefs = {1.0};
      if (xk(cb, k) >= 0) {
        cols.push_back(xk(cb, k));
        coefs.push_back(-1.0);
      }
      if (xk(ca, k) >= 0) {
        cols.push_back(xk(ca, k));
        coefs.push_back(1.0);
      }
      model.add_row(cols, coefs, S::kLessEqual, 1.0);
    }
  }
  // Node latencies.
  std::vector<int> L(n);
  for (size_t v = 0; v < n; ++v) {
    L[v] = model.add_column(0, kInf, 0, false);
    model.add_row({{total, 1.0}, {L[v], -1.0}}, S::kGreaterEqual, 0.0);
    const uint32_t c = cc.class_of_node[v];
    if (x0[c] >= 0 && p.nodes[v].time_s[pool] > 0) {
      model.add_row({{L[v], 1.0}, {x0[c], -p.nodes[v].time_s[pool]}}, S::kGreaterEqual, 0.0);
    }
  }
  const auto pred = node_predecessors(p);
  for (size_t v = 0; v < n; ++v) {
    const uint32_t c = cc.class_of_node[v];
    for (uint32_t u : pred[v]) {
      // L_v >= L_u + pool_time(v) * x0_c
      if (x0[c] >= 0 && p.nodes[v].time_s[pool] > 0) {
        model.add_row({{L[v], 1.0}, {L[u], -1.0}, {x0[c], -p.nodes[v].time_s[pool]}},
                      S::kGreaterEqual, 0.0);
      } else {
        model.add_row({{L[v], 1.0}, {L[u], -1.0}}, S::kGreaterEqual, 0.0);
      }
    }
  }
  // Subgraphs: start, finish, communication.
  for (size_t k = 0; k < K; ++k) {
    const int t = acc_type[k];
    const int start = model.add_column(0, kInf, 0, false);
    const int finish = model.add_column(0, kInf, 0, false);
    std::vector<int> cols = {finish, start};
    std::vector<double> coefs = {1.0, -1.0};
    for (size_t c = 0; c < C; ++c) {
      if (xk(c, k) >= 0) {
        cols.push_back(xk(c, k));
        coefs.push_back(-class_time[c][t]);
      }
    }
    for (const PipelineTensor& e : p.tensors) {
      const uint32_t pc = cc.class_of_node[e.producer];
      std::vector<uint32_t> qs;
      for (uint32_t q : e.consumers) {
        if (cc.class_of_node[q] != pc) qs.push_back(cc.class_of_node[q]);
      }
      std::sort(qs.begin(), qs.end());
      qs.erase(std::unique(qs.begin(), qs.end()), qs.end());
      if (qs.empty()) continue;
      const int xp = xk(pc, k);
      bool any_q = false;
      for (uint32_t q : qs) any_q = any_q || xk(q, k) >= 0;
      if (any_q) {  // the tensor may enter
        const int in = model.add_column(0, 1, 0, false);
        for (uint32_t q : qs) {
          if (xk(q, k) < 0) continue;
          std::vector<int> rc = {in, xk(q, k)};
          std::vector<double> rv = {1.0, -1.0};
          if (xp >= 0) {
            rc.push_back(xp);
            rv.push_back(1.0);
          }
          model.add_row(rc, rv, S::kGreaterEqual, 0.0);  // in >= x_q - x_p
        }
        // start >= L_producer - (1 - in) * M
        model.add_row({{start, 1.0}, {L[e.producer], -1.0}, {in, -big_m}}, S::kGreaterEqual,
                      -big_m);
        if (e.comm_s[t] > 0) {
          cols.push_back(in);
          coefs.push_back(-e.comm_s[t]);
        }
      }
      if (xp >= 0 && e.comm_s[t] > 0) {  // the tensor may leave
        const int out = model.add_column(0, 1, 0, false);
        for (uint32_t q : qs) {
          std::vector<int> rc = {out, xp};
          std::vector<double> rv = {1.0, -1.0};
          if (xk(q, k) >= 0) {
            rc.push_back(xk(q, k));
            rv.push_back(1.0);
          }
          model.add_row(rc, rv, S::kGreaterEqual, 0.0);  // out >= x_p - x_q
        }
        cols.push_back(out);
        coefs.push_back(-e.comm_s[t]);
      }
    }
    model.add_row(cols, coefs, S::kEqual, 0.0);  // finish = start + load
    for (size_t v = 0; v < n; ++v) {
      const int col = xk(cc.class_of_node[v], k);
      if (col < 0) continue;
      // L_v >= finish - (1 - x) * M
      model.add_row({{L[v], 1.0}, {finish, -1.0}, {col, -big_m}}, S::kGreaterEqual, -big_m);
    }
  }

  // Warm start from the greedy split.
  MilpOptions milp;
  milp.time_limit_s = options.time_limit_s;
  milp.threads = options.threads;
  if (greedy.feasible) {
    std::vector<int> machine_of_class(C, -1);  // -1 pool, else k
    for (size_t v = 0; v < n; ++v) {
      const int d = greedy.device_of_node[v];
      const auto it = std::find(accels.begin(), accels.end(), d);
      machine_of_class[cc.class_of_node[v]] =
          it == accels.end() ? -1 : static_cast<int>(it - accels.begin());
    }
    for (size_t c = 0; c < C; ++c) {
      if (x0[c] >= 0) milp.start.emplace_back(x0[c], machine_of_class[c] == -1 ? 1.0 : 0.0);
      for (size_t k = 0; k < K; ++k) {
        if (xk(c, k) >= 0) {
          milp.start.emplace_back(xk(c, k), machine_of_class[c] == static_cast<int>(k) ? 1.0 : 0.0);
        }
      }
    }
  }
  const MilpResult r = solve_milp(model, milp);
  result.seconds = r.seconds;
  result.best_bound_s = std::max(r.best_bound, critical_path);
  if (r.values.empty()) {
    const std::string why = milp_no_solution_note(r, options.time_limit_s);
    result.note =
        r.status == MilpResult::Status::kInfeasible ? "the latency program is infeasible" : why;
    if (greedy.feasible) {
      result = greedy;
      result.note = why + "; kept the greedy split";
    }
    return result;
  }
  result.device_of_node.resize(n);
  for (size_t v = 0; v < n; ++v) {
    const uint32_t c = cc.class_of_node[v];
    int d = -1;
    for (size_t k = 0; k < K; ++k) {
      if (xk(c, k) >= 0 && r.values[xk(c, k)] > 0.5) d = accels[k];
    }
    if (d < 0) {
      DPLACE_CHECK(x0[c] >= 0 && r.values[x0[c]] > 0.5) << "class without a machine";
      d = p.first_device_of_type(pool);
    }
    result.device_of_node[v] = d;
  }
  const LatencyEvaluation ev = evaluate_latency(p, result.device_of_node);
  result.feasible = ev.valid;
  result.latency_s = ev.latency_s;
  result.optimal = r.status == MilpResult::Status::kOptimal;
  if (!ev.valid) result.note = ev.problem;
  if (greedy.feasible && (!ev.valid || greedy.latency_s < ev.latency_s)) {
    const double bound = result.best_bound_s;
    result = greedy;
    result.best_bound_s = bound;
    result.note = "the greedy split evaluates better than CBC's; kept it";
  } else if (greedy.feasible && !result.optimal && ev.latency_s == greedy.latency_s) {
    // CBC's incumbent is the greedy hot start: the limit stopped it before any improvement.
    result.note = fmt::format("CBC stopped at its {} s limit without improving on the greedy split",
                              options.time_limit_s);
  }
  return result;
}

}  // namespace dplace
