#include "dplace/placers/common/test_cases.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "dplace/core/error.h"

namespace dplace::testing {
namespace {

constexpr double kGB = 1e9;

Device gpu(const std::string& name, double memory_bytes) {
  Device d;
  d.name = name;
  d.kind = DeviceKind::kGpu;
  d.peak_flops = 1e12;
  d.mem_bandwidth_bytes_per_s = 1e11;
  d.memory_bytes = static_cast<int64_t>(memory_bytes);
  return d;
}

Device cpu(const std::string& name) {
  Device d = gpu(name, 64 * kGB);
  d.kind = DeviceKind::kCpu;
  return d;
}

Cluster make_cluster(const std::string& name, std::vector<Device> devices, bool linked = true) {
  ClusterSpec spec;
  spec.name = name;
  spec.source = "test";
  spec.devices = std::move(devices);
  if (linked) spec.default_link = Link{.bandwidth_bytes_per_s = 1e9, .latency_s = 0};
  return Cluster(std::move(spec), "test cluster " + name);
}

}  // namespace

Op timed(const std::string& name, std::vector<TensorRef> inputs, double gpu_s, double cpu_s,
         int64_t output_bytes) {
  Op op;
  op.name = name;
  op.type = "Test";
  op.inputs = std::move(inputs);
  op.output_bytes = {output_bytes};
  op.time_s = {{"gpu", gpu_s}, {"cpu", cpu_s}};
  return op;
}

PlacerCase::PlacerCase(Graph graph, Cluster cluster, double optimum_s)
    : graph_(std::move(graph)), cluster_(std::move(cluster)), optimum_s_(optimum_s) {
  costs_ = std::make_unique<CostTable>(graph_, cluster_);
  simulator_ = std::make_unique<Simulator>(graph_, cluster_, *costs_);
}

OpId PlacerCase::op(const std::string& name) const {
  auto id = graph_.find_op(name);
  DPLACE_CHECK(id.has_value()) << "no op " << name;
  return *id;
}

DeviceId PlacerCase::device(const std::string& name) const {
  auto id = cluster_.find_device(name);
  DPLACE_CHECK(id.has_value()) << "no device " << name;
  return *id;
}

namespace {

std::unique_ptr<PlacerCase> two_chains(bool linked) {
  GraphBuilder b("two_chains", "test");
  for (const char* chain : {"a", "b"}) {
    OpId prev = OpId::invalid();
    for (int i = 0; i < 3; ++i) {
      std::vector<TensorRef> in;
      if (prev.valid()) in.push_back({prev, 0});
      prev = b.add_op(timed(fmt::format("{}{}", chain, i), in, 1.0, 1.0, int64_t(1 * kGB)));
    }
  }
  return std::make_unique<PlacerCase>(
      std::move(b).build(),
      make_cluster(linked ? "two-gpus" : "two-unlinked-gpus",
                   {gpu("/gpu:0", 16 * kGB), gpu("/gpu:1", 16 * kGB)}, linked),
      3.0);
}

}  // namespace

std::unique_ptr<PlacerCase> two_chains_case() { return two_chains(true); }
std::unique_ptr<PlacerCase> two_unlinked_chains_case() { return two_chains(false); }

namespace {

Graph memory_tight_graph() {
  GraphBuilder b("memory_tight", "test");
  OpId prev = OpId::invalid();
  const std::pair<const char*, double> ops[] = {{"A", 8}, {"B", 6}, {"C", 3}, {"D", 2}};
  for (const auto& [name, params_gb] : ops) {
    std::vector<TensorRef> in;
    if (prev.valid()) in.push_back({prev, 0});
    Op op = timed(name, in, 1.0, 1.0, 1000);
    op.param_bytes = static_cast<int64_t>(params_gb * kGB);
    prev = b.add_op(std::move(op));
  }
  return std::move(b).build();
}

}  // namespace

std::unique_ptr<PlacerCase> memory_tight_case() {
  return std::make_unique<PlacerCase>(
      memory_tight_graph(),
      make_cluster("two-small-gpus", {gpu("/gpu:0", 10.5 * kGB), gpu("/gpu:1", 10.5 * kGB)}),
      4.0 + 2 * 1000 / 1e9);
}

std::unique_ptr<PlacerCase> oversubscribed_case() {
  return std::make_unique<PlacerCase>(
      memory_tight_graph(), make_cluster("one-small-gpu", {gpu("/gpu:0", 10.5 * kGB)}), 4.0);
}

std::unique_ptr<PlacerCase> oversubscribed_gpu_with_cpu_case() {
  return std::make_unique<PlacerCase>(
      memory_tight_graph(),
      make_cluster("cpu-and-small-gpu", {cpu("/cpu:0"), gpu("/gpu:0", 10.5 * kGB)}), 0.0);
}

std::unique_ptr<PlacerCase> oversubscribed_pair_case() {
  return std::make_unique<PlacerCase>(
      memory_tight_graph(),
      make_cluster("two-5gb-gpus", {gpu("/gpu:0", 5 * kGB), gpu("/gpu:1", 5 * kGB)}), 0.0);
}

std::unique_ptr<PlacerCase> shared_parameter_case() {
  GraphBuilder b("shared_parameter", "test");
  Op w = timed("W", {}, 0.001, 0.001, 1000);
  w.param_bytes = 1 << 20;
  const OpId iw = b.add_op(std::move(w));
  auto forward = [](Op op) {
    op.phase = Phase::kForward;
    return op;
  };
  const OpId a = b.add_op(forward(timed("A", {{iw, 0}}, 1.0, 1.0, 1000)));
  const OpId bb = b.add_op(forward(timed("B", {{iw, 0}}, 1.0, 1.0, 1000)));
  b.add_op(timed("C", {{a, 0}, {bb, 0}}, 1.0, 1.0, 1000));
  return std::make_unique<PlacerCase>(
      std::move(b).build(),
      make_cluster("two-gpus", {gpu("/gpu:0", 16 * kGB), gpu("/gpu:1", 16 * kGB)}), 0.0);
}

std::unique_ptr<PlacerCase> colocation_case() {
  GraphBuilder b("colocation", "test");
  Op a = timed("a", {}, 3.0, 3.0, 1000);
  a.colocate = "ac";
  const OpId ia = b.add_op(std::move(a));
  b.add_op(timed("b", {{ia, 0}}, 1.0, 1.0, 1000));
  Op c = timed("c", {}, 2.0, 2.0, 1000);
  c.colocate = "ac";
  b.add_op(std::move(c));
  return std::make_unique<PlacerCase>(
      std::move(b).build(),
      make_cluster("two-gpus", {gpu("/gpu:0", 16 * kGB), gpu("/gpu:1", 16 * kGB)}), 5.0);
}

std::unique_ptr<PlacerCase> cpu_only_case() {
  GraphBuilder b("cpu_only", "test");
  const int64_t mb = 1000000;
  Op load = timed("load", {}, 0.5, 0.5, mb);
  load.devices = {"cpu"};
  const OpId l = b.add_op(std::move(load));
  const OpId m1 = b.add_op(timed("mm1", {{l, 0}}, 1.0, 10.0, mb));
  const OpId m2 = b.add_op(timed("mm2", {{m1, 0}}, 1.0, 10.0, mb));
  b.add_op(timed("loss", {{m2, 0}}, 0.1, 1.0, 4));
  return std::make_unique<PlacerCase>(
      std::move(b).build(), make_cluster("cpu-gpu", {cpu("/cpu:0"), gpu("/gpu:0", 16 * kGB)}),
      0.5 + 0.001 + 1.0 + 1.0 + 0.1);
}

std::unique_ptr<PlacerCase> disjoint_devices_case() {
  GraphBuilder b("disjoint_devices", "test");
  const int64_t mb = 1000000;
  Op load = timed("load", {}, 0.5, 0.5, mb);
  load.devices = {"cpu"};
  const OpId l = b.add_op(std::move(load));
  Op mm = timed("mm", {{l, 0}}, 1.0, 10.0, mb);
  mm.devices = {"gpu"};
  const OpId m = b.add_op(std::move(mm));
  b.add_op(timed("loss", {{m, 0}}, 0.1, 1.0, 4));
  return std::make_unique<PlacerCase>(
      std::move(b).build(), make_cluster("cpu-gpu", {cpu("/cpu:0"), gpu("/gpu:0", 16 * kGB)}),
      0.5 + 0.001 + 1.0 + 0.1);
}

std::unique_ptr<PlacerCase> heavy_light_case(double heavy_params_gb) {
  GraphBuilder b("heavy_light", "test");
  Op heavy = timed("heavy", {}, 1.0, 10.0, 4);
  heavy.param_bytes = static_cast<int64_t>(heavy_params_gb * kGB);
  b.add_op(std::move(heavy));
  b.add_op(timed("light", {}, 0.2, 0.8, 4));
  return std::make_unique<PlacerCase>(
      std::move(b).build(), make_cluster("cpu-gpu", {cpu("/cpu:0"), gpu("/gpu:0", 16 * kGB)}),
      heavy_params_gb > 16 ? 10.0 : 1.0);
}

std::unique_ptr<PlacerCase> lone_op_case() {
  GraphBuilder b("lone_op", "test");
  b.add_op(timed("mm", {}, 1.0, 10.0, 4));
  return std::make_unique<PlacerCase>(
      std::move(b).build(), make_cluster("cpu-gpu", {cpu("/cpu:0"), gpu("/gpu:0", 16 * kGB)}), 1.0);
}

std::unique_ptr<PlacerCase> wide_case(int width) {
  GraphBuilder b("wide", "test");
  const OpId src = b.add_op(timed("src", {}, 1e-3, 1e-3, 1000));
  std::vector<TensorRef> middle;
  for (int i = 0; i < width; ++i) {
    middle.push_back({b.add_op(timed(fmt::format("m{}", i), {{src, 0}}, 1e-3, 1e-3, 1000)), 0});
  }
  b.add_op(timed("sink", std::move(middle), 1e-3, 1e-3, 4));
  return std::make_unique<PlacerCase>(
      std::move(b).build(),
      make_cluster("two-gpus", {gpu("/gpu:0", 16 * kGB), gpu("/gpu:1", 16 * kGB)}), 0.0);
}

std::unique_ptr<PlacerCase> shared_weight_case() {
  GraphBuilder b("shared_weight", "test");
  Op w = timed("W", {}, 0.0, 0.0, int64_t(2 * kGB));
  w.type = "Input";
  const OpId iw = b.add_op(std::move(w));
  for (const char* name : {"A", "B"}) {
    Op op = timed(name, {{iw, 0}}, 1.0, 1.0, 4);
    op.devices = {"gpu"};
    b.add_op(std::move(op));
  }
  return std::make_unique<PlacerCase>(
      std::move(b).build(),
      make_cluster("cpu-two-gpus",
                   {cpu("/cpu:0"), gpu("/gpu:0", 16 * kGB), gpu("/gpu:1", 16 * kGB)}),
      2.0);
}

std::unique_ptr<PlacerCase> link_gap_case() {
  GraphBuilder b("link_gap", "test");
  auto on_gpu0 = [](Op op) {
    op.devices = {"/gpu:0"};
    return op;
  };
  const OpId x = b.add_op(on_gpu0(timed("X", {}, 1.0, 1.0, int64_t(0.4 * kGB))));
  const OpId y = b.add_op(on_gpu0(timed("Y", {}, 0.5, 0.5, int64_t(0.5 * kGB))));
  b.add_op(on_gpu0(timed("D", {{x, 0}}, 0.7, 0.7, 4)));
  b.add_op(timed("C", {{y, 0}, {x, 0}}, 0.5, 0.5, 4));
  return std::make_unique<PlacerCase>(
      std::move(b).build(),
      make_cluster("two-gpus", {gpu("/gpu:0", 16 * kGB), gpu("/gpu:1", 16 * kGB)}), 2.5);
}

std::unique_ptr<PlacerCase> restricted_fill_case() {
  GraphBuilder b("restricted_fill", "test");
  for (int i = 0; i < 6; ++i) {
    Op op = timed(fmt::format("o{}", i), {}, 1.0, 1.0, 4);
    op.param_bytes = int64_t(10 * kGB);
    if (i == 3) op.devices = {"/gpu:0", "/gpu:2"};
    b.add_op(std::move(op));
  }
  return std::make_unique<PlacerCase>(
      std::move(b).build(),
      make_cluster("three-gpus",
                   {gpu("/gpu:0", 40 * kGB), gpu("/gpu:1", 40 * kGB), gpu("/gpu:2", 40 * kGB)}),
      2.0);
}

std::unique_ptr<PlacerCase> oom_cheap_start_case() {
  GraphBuilder b("oom_cheap_start", "test");
  OpId prev = OpId::invalid();
  for (int i = 0; i < 4; ++i) {
    std::vector<TensorRef> in;
    if (prev.valid()) in.push_back({prev, 0});
    Op op = timed(fmt::format("A{}", i), in, 1.0, 30.0, 4);
    op.param_bytes = int64_t(1 * kGB);
    prev = b.add_op(std::move(op));
  }
  return std::make_unique<PlacerCase>(
      std::move(b).build(), make_cluster("cpu-gpu39", {cpu("/cpu:0"), gpu("/gpu:0", 3.9 * kGB)}),
      33.0 + 4 / 1e9);
}

PlaceRequest case_request(const PlacerCase& c) {
  PlaceRequest request;
  request.graph = &c.graph();
  request.cluster = &c.cluster();
  request.costs = &c.costs();
  request.simulator = &c.simulator();
  return request;
}

PlacerRun run_placer(const PlacerCase& c, const std::string& name, const RunOptions& options) {
  PlaceRequest request = case_request(c);
  request.seed = options.seed;
  request.budget_seconds = options.budget_seconds;
  request.params = options.params;
  request.expert = options.expert;
  request.deadline = options.deadline;
  PlacerRun run;
  run.result = make_placer(name)->place(request);
  run.sim = c.simulator().run(run.result.placement);
  return run;
}

int64_t least_overflow_bytes(const PlacerCase& c) {
  const size_t n = c.graph().num_ops(), d = c.cluster().num_devices();
  Placement p;
  p.device_of_op.assign(n, DeviceId::from_index(0));
  int64_t least = INT64_MAX;
  while (true) {
    least = std::min(least, c.simulator().run(p).total_overflow_bytes());
    // The next placement, counting in base d over the ops.
    size_t i = 0;
    while (i < n && p.device_of_op[i].value() + 1 == d)
      p.device_of_op[i++] = DeviceId::from_index(0);
    if (i == n) return least;
    p.device_of_op[i] = DeviceId::from_index(p.device_of_op[i].value() + 1);
  }
}

std::string describe(const PlacerCase& c, const Placement& p) {
  std::string out;
  for (size_t i = 0; i < c.graph().num_ops(); ++i) {
    const OpId op = OpId::from_index(i);
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", c.graph().op(op).name,
                       c.cluster().device(p[op]).name);
  }
  return out;
}

}  // namespace dplace::testing
