// Small pipeline problems for the pipeline tests, and brute-force optima to check solvers
// against (test-only; header-only).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dplace/placers/pipeline/problem.h"

namespace dplace::testing_pipeline {

// Two device types like the paper's instances: `accels` accelerators (memory cap, pay
// communication) and `cpus` CPU cores (no cap, no communication).
inline PipelineProblem make_problem(int accels, int cpus, double cap_bytes = kUncappedBytes) {
  PipelineProblem p;
  p.name = "test";
  PipelineDeviceType a{"accel", accels, cap_bytes, true, {}, {}};
  for (int i = 0; i < accels; ++i) a.device_names.push_back("/accel:" + std::to_string(i));
  PipelineDeviceType c{"cpu", cpus, kUncappedBytes, false, {}, {}};
  for (int i = 0; i < cpus; ++i) c.device_names.push_back("/cpu:" + std::to_string(i));
  p.types = {a, c};
  return p;
}

// Adds a node with accelerator time `a` and CPU time `c`; returns its index.
inline uint32_t add_node(PipelineProblem& p, double a, double c, double size = 0,
                         int64_t colour = -1, bool backward = false) {
  PipelineNode n;
  n.name = "n" + std::to_string(p.nodes.size());
  n.time_s = {a, c};
  n.size_bytes = size;
  n.colour = colour;
  n.backward = backward;
  n.external_id = static_cast<int64_t>(p.nodes.size());
  p.nodes.push_back(n);
  return static_cast<uint32_t>(p.nodes.size() - 1);
}

inline void add_tensor(PipelineProblem& p, uint32_t producer, std::vector<uint32_t> consumers,
                       double cost) {
  PipelineTensor t;
  t.producer = producer;
  t.consumers = std::move(consumers);
  t.comm_s = {cost, cost};
  p.tensors.push_back(t);
}

// x -> y -> z on one accelerator and one CPU core, where y runs only on the CPU: the accelerator
// wants {x, z}, which is not convex. Best contiguous split: 51 (the CPU also takes x or z); best
// split: 11 (accelerator 5 + 5 + 0.5 for x leaving + 0.5 for y entering; CPU 1).
inline PipelineProblem cpu_op_between_two_accelerator_ops() {
  PipelineProblem p = make_problem(1, 1);
  add_node(p, 5, 50);             // x
  add_node(p, kInfiniteTime, 1);  // y
  add_node(p, 5, 50);             // z
  add_tensor(p, 0, {1}, 0.5);
  add_tensor(p, 1, {2}, 0.5);
  return p;
}

// A random DAG of n nodes: edges only from lower to higher index, some colours shared, some
// backward nodes paired with forward ones by colour.
inline PipelineProblem random_problem(std::mt19937_64& rng, int n, int accels, int cpus,
                                      bool with_backward, bool with_cap) {
  std::uniform_real_distribution<double> time(1.0, 10.0);
  std::uniform_real_distribution<double> cost(0.0, 3.0);
  std::uniform_int_distribution<int> coin(0, 99);
  PipelineProblem p = make_problem(accels, cpus, with_cap ? 25.0 : kUncappedBytes);
  const int forward = with_backward ? (n + 1) / 2 : n;
  for (int i = 0; i < forward; ++i) {
    const double a = time(rng);
    const int64_t colour = coin(rng) < 25 && i > 0 ? i - 1 : i;  // sometimes share a colour
    add_node(p, a, coin(rng) < 10 ? kInfiniteTime : 4 * a, with_cap ? time(rng) : 0, colour);
  }
  for (int i = forward; i < n; ++i) {
    const double a = time(rng);
    // Pair with a forward node's colour, or (sometimes) an orphan colour of its own.
    const int64_t colour = coin(rng) < 20 ? 1000 + i : (i - forward) % forward;
    add_node(p, a, 4 * a, with_cap ? time(rng) : 0, colour, true);
  }
  for (int i = 0; i < n; ++i) {
    std::vector<uint32_t> consumers;
    for (int j = i + 1; j < n; ++j) {
      const bool i_bwd = i >= forward;
      const bool j_bwd = j >= forward;
      if (i_bwd && !j_bwd) continue;  // no backward -> forward edges
      if (coin(rng) < 35) consumers.push_back(static_cast<uint32_t>(j));
    }
    if (!consumers.empty()) add_tensor(p, static_cast<uint32_t>(i), consumers, cost(rng));
  }
  return p;
}

// Calls visit(assignment) for every node -> device assignment that keeps colour classes together.
inline void for_each_assignment(const PipelineProblem& p,
                                const std::function<void(const std::vector<int>&)>& visit) {
  const int devices = p.num_devices();
  const size_t n = p.nodes.size();
  std::vector<int> a(n, 0);
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == n) {
      visit(a);
      return;
    }
    // A node with the colour of an earlier node must follow it.
    for (size_t j = 0; j < i; ++j) {
      if (p.nodes[i].colour >= 0 && p.nodes[j].colour == p.nodes[i].colour) {
        a[i] = a[j];
        rec(i + 1);
        return;
      }
    }
    for (int d = 0; d < devices; ++d) {
      a[i] = d;
      rec(i + 1);
    }
  };
  rec(0);
}

// The best max load over assignments respecting colours, caps and allowed types; contiguous
// ones only when `contiguous`. Infinity when none.
inline double brute_force_throughput(const PipelineProblem& p, bool contiguous) {
  double best = std::numeric_limits<double>::infinity();
  for_each_assignment(p, [&](const std::vector<int>& a) {
    const PipelineEvaluation ev = evaluate_pipeline(p, a);
    if (!ev.violation.empty()) return;
    if (contiguous && !ev.contiguous) return;
    best = std::min(best, ev.max_load_s);
  });
  return best;
}

}  // namespace dplace::testing_pipeline
