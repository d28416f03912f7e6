// Graph generation time of every built-in model at its default size (see bench/RESULTS.md,
// section "Model generation").
//
// <model>/training: one ModelEntry::build per iteration of the training graph (forward ops,
// expand_training's backward and update ops, GraphBuilder validation); <model>/inference: the
// forward graph alone. Counters: ops (of the built graph) and ops_per_s.
//
// simulate/<model>[/vocab=<v>][/addn]/<placement>: one Simulator::run per iteration of the
// model's default training graph on the paper-k80x4 preset (the 2017 paper's 1 CPU + 4 K80 dies),
// with every op on /gpu:0 ("gpu0") or the model's expert placement ("expert"); "addn" expands the
// forward graph with GradientAggregation::kAddN instead of the default running sums. Counters:
// step_s (simulated step time), peak_GB (largest per-device peak memory, 1e9 bytes), gpu<i>_GB
// (each GPU's peak), feasible (1 when no device is out of memory). These are the memory figures
// of docs/models.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "dplace/cluster/presets.h"
#include "dplace/cost/cost_model.h"
#include "dplace/ir/training.h"
#include "dplace/models/registry.h"
#include "dplace/sim/placement.h"
#include "dplace/sim/simulator.h"

namespace dplace {
namespace {

void BM_BuildModel(benchmark::State& state, const ModelEntry* model, bool training) {
  ModelOptions options;
  options.inference = !training;
  size_t ops = 0;
  for (auto _ : state) {
    Graph g = model->build(options);
    ops = g.num_ops();
    benchmark::DoNotOptimize(g);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops) * state.iterations(),
                                                   benchmark::Counter::kIsRate);
}

struct SimCase {
  const ModelEntry* model;
  std::optional<int> vocab;
  bool add_n = false;
  bool expert = false;
};

void BM_SimulateModel(benchmark::State& state, SimCase c) {
  const Cluster cluster = load_preset("paper-k80x4");
  ModelOptions options;
  options.vocab = c.vocab;
  options.inference = c.add_n;
  Graph g = c.model->build(options);
  if (c.add_n) g = expand_training(g, {.aggregation = GradientAggregation::kAddN});
  const CostTable costs(g, cluster);
  const Simulator sim(g, cluster, costs);
  const Placement p = c.expert ? c.model->expert(g, cluster)
                               : single_device_placement(g, *cluster.find_device("/gpu:0"));
  SimWorkspace workspace;
  SimResult result;
  for (auto _ : state) sim.run(p, workspace, result);
  int64_t peak = 0;
  for (const DeviceStats& d : result.devices) peak = std::max(peak, d.peak_memory_bytes);
  state.counters["step_s"] = result.step_time_s;
  state.counters["peak_GB"] = static_cast<double>(peak) / 1e9;
  state.counters["feasible"] = result.feasible ? 1 : 0;
  const auto gpus = cluster.devices_of_kind(DeviceKind::kGpu);
  for (size_t i = 0; i < gpus.size(); ++i) {
    state.counters["gpu" + std::to_string(i) + "_GB"] =
        static_cast<double>(result.devices[gpus[i].value()].peak_memory_bytes) / 1e9;
  }
}

int register_all() {
  for (const ModelEntry& m : model_registry()) {
    for (bool training : {false, true}) {
      benchmark::RegisterBenchmark(
          (m.name + (training ? "/training" : "/inference")).c_str(),
          [&m, training](benchmark::State& s) { BM_BuildModel(s, &m, training); })
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const ModelEntry& m : model_registry()) {
    if (!m.expert) continue;
    std::vector<SimCase> cases = {{&m, std::nullopt}};
    if (m.name == "nmt") {
      for (int vocab : {30000, 50000, 60000, 80000}) cases.push_back({&m, vocab});
    }
    if (m.name == "rnnlm" || m.name == "nmt") cases.push_back({&m, std::nullopt, true});
    for (SimCase c : cases) {
      for (bool expert : {false, true}) {
        c.expert = expert;
        const std::string name = "simulate/" + m.name +
                                 (c.vocab ? "/vocab=" + std::to_string(*c.vocab) : "") +
                                 (c.add_n ? "/addn" : "") + (expert ? "/expert" : "/gpu0");
        benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& s) {
          BM_SimulateModel(s, c);
        })->Unit(benchmark::kMillisecond);
      }
    }
  }
  return 0;
}

const int kRegistered = register_all();

}  // namespace
}  // namespace dplace

BENCHMARK_MAIN();
