// Simulator throughput on synthetic layered DAGs (see bench/RESULTS.md, section "Simulator").
//
// Graph: `num_ops` ops in layers of 64; every op after the first layer reads 2 tensors of the
// previous layer and, one time in four, a third from two layers back; one op in eight has two
// outputs. flops in [1e6, 1e9), outputs in [1 KB, 1 MB), so ops take microseconds to milliseconds
// and transfers are comparable. Cluster: `num_devices` identical GPUs joined by a default link.
//
// BM_Simulate/<ops>/<devices>/<random>: one run() per iteration with a reused workspace, cycling
// through 8 seeded placements: random=1 puts each op on a uniformly random device (most tensors
// cross devices), random=0 cuts the topological order into `num_devices` contiguous blocks (few
// transfers). Counter ops_per_s = simulated ops per wall-clock second.
// BM_BuildSimulator/<ops>/<devices>: the one-off cost of CostTable + Simulator construction.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/core/rng.h"
#include "dplace/cost/cost_model.h"
#include "dplace/ir/graph.h"
#include "dplace/sim/placement.h"
#include "dplace/sim/simulator.h"

namespace dplace {
namespace {

constexpr size_t kLayerWidth = 64;
constexpr int kNumPlacements = 8;

Graph layered_graph(size_t num_ops, uint64_t seed) {
  Rng rng(seed);
  GraphBuilder b("layered" + std::to_string(num_ops), "sim_bench");
  std::vector<uint32_t> outputs(num_ops);
  for (size_t i = 0; i < num_ops; ++i) {
    const size_t layer = i / kLayerWidth;
    Op op;
    op.name = "op" + std::to_string(i);
    op.type = (i % 3 == 0) ? "MatMul" : "Add";
    op.flops = 1e6 + rng.uniform01() * 1e9;
    outputs[i] = rng.uniform_int(8) == 0 ? 2 : 1;
    op.output_bytes.clear();
    for (uint32_t k = 0; k < outputs[i]; ++k) {
      op.output_bytes.push_back(1000 + static_cast<int64_t>(rng.uniform_int(1000000)));
    }
    op.param_bytes = static_cast<int64_t>(rng.uniform_int(1 << 20));
    auto pick = [&](size_t from_layer) {
      const size_t j = from_layer * kLayerWidth + rng.uniform_int(kLayerWidth);
      op.inputs.push_back(
          {OpId::from_index(j), static_cast<uint32_t>(rng.uniform_int(outputs[j]))});
    };
    if (layer >= 1) {
      pick(layer - 1);
      pick(layer - 1);
    }
    if (layer >= 2 && rng.uniform_int(4) == 0) pick(layer - 2);
    b.add_op(std::move(op));
  }
  return std::move(b).build();
}

Cluster gpu_cluster(size_t num_devices) {
  ClusterSpec spec;
  spec.name = "bench-gpus";
  spec.source = "synthetic";
  for (size_t i = 0; i < num_devices; ++i) {
    Device d;
    d.name = "/gpu:" + std::to_string(i);
    d.kind = DeviceKind::kGpu;
    d.peak_flops = 1.5e13;
    d.mem_bandwidth_bytes_per_s = 9e11;
    d.memory_bytes = int64_t{16} << 30;
    d.op_overhead_s = 5e-6;
    d.efficiency = {{"default", 0.4}, {"MatMul", 0.7}};
    spec.devices.push_back(d);
  }
  spec.default_link = Link{.bandwidth_bytes_per_s = 1.2e10, .latency_s = 1e-5};
  return Cluster(std::move(spec), "sim_bench");
}

Placement make_placement(const Graph& g, size_t num_devices, bool random, Rng& rng) {
  Placement p;
  p.device_of_op.resize(g.num_ops());
  if (random) {
    for (auto& d : p.device_of_op) d = DeviceId::from_index(rng.uniform_int(num_devices));
    return p;
  }
  // Contiguous blocks of the topological order, with a random boundary shift per placement.
  const size_t n = g.num_ops();
  const size_t shift = rng.uniform_int(kLayerWidth);
  for (size_t r = 0; r < n; ++r) {
    const size_t block = std::min(num_devices - 1, (r + shift) * num_devices / (n + kLayerWidth));
    p.device_of_op[g.topo_order()[r].value()] = DeviceId::from_index(block);
  }
  return p;
}

void BM_Simulate(benchmark::State& state) {
  const size_t num_ops = static_cast<size_t>(state.range(0));
  const size_t num_devices = static_cast<size_t>(state.range(1));
  const bool random = state.range(2) != 0;
  const Graph graph = layered_graph(num_ops, 42);
  const Cluster cluster = gpu_cluster(num_devices);
  const CostTable costs(graph, cluster);
  const Simulator sim(graph, cluster, costs);
  Rng rng(7);
  std::vector<Placement> placements;
  for (int k = 0; k < kNumPlacements; ++k) {
    placements.push_back(make_placement(graph, num_devices, random, rng));
  }
  SimWorkspace workspace;
  SimResult result;
  // Warm-up, and the transfers per run as the mean over the 8 placements: the same figure at
  // every run (averaged over the timed iterations it moved with their count).
  double transfers = 0;
  for (const Placement& p : placements) {
    sim.run(p, workspace, result);
    transfers += static_cast<double>(result.num_transfers);
  }
  size_t k = 0;
  for (auto _ : state) {
    sim.run(placements[k], workspace, result);
    benchmark::DoNotOptimize(result.step_time_s);
    k = (k + 1) % kNumPlacements;
  }
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(num_ops) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.counters["transfers_per_run"] = transfers / kNumPlacements;
}

void BM_BuildSimulator(benchmark::State& state) {
  const size_t num_ops = static_cast<size_t>(state.range(0));
  const size_t num_devices = static_cast<size_t>(state.range(1));
  const Graph graph = layered_graph(num_ops, 42);
  const Cluster cluster = gpu_cluster(num_devices);
  for (auto _ : state) {
    const CostTable costs(graph, cluster);
    const Simulator sim(graph, cluster, costs);
    benchmark::DoNotOptimize(sim.lower_bound_s());
  }
}

// With --benchmark_repetitions=N, also report the fastest repetition: on a shared machine the
// minimum is the least disturbed figure.
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

BENCHMARK(BM_Simulate)
    ->ArgNames({"ops", "devices", "random"})
    ->ArgsProduct({{1000, 10000, 100000}, {4, 8}, {1, 0}})
    ->ComputeStatistics("min", min_of)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BuildSimulator)
    ->ArgNames({"ops", "devices"})
    ->ArgsProduct({{1000, 10000, 100000}, {4, 8}})
    ->ComputeStatistics("min", min_of)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dplace

BENCHMARK_MAIN();
