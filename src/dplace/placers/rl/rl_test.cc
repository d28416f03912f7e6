// Seeded behaviour tests of the RL placer on toy graphs whose best placements are worked out by
// hand: it learns the optimum, is deterministic, resumes from a checkpoint exactly, and the OOM
// penalty is what keeps it from out-of-memory placements.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "dplace/core/error.h"
#include "dplace/core/rng.h"
#include "dplace/core/scratch_dir.h"
#include "dplace/core/thread_pool.h"
#include "dplace/placers/rl/policy.h"
#include "dplace/placers/rl/reward.h"
#include "dplace/placers/rl/rl_placer.h"

namespace dplace::rl {
namespace {

// Devices: /cpu:0 at 1 GFLOP/s, /gpu:0 and /gpu:1 at 10 GFLOP/s, no per-op overhead, memory
// bandwidth high enough never to matter; every pair joined by a 1 GB/s link without latency.
Cluster toy_cluster(int64_t gpu_memory_bytes, int64_t cpu_memory_bytes = int64_t{1} << 40) {
  ClusterSpec spec;
  spec.name = "toy";
  auto device = [](std::string name, DeviceKind kind, double flops, int64_t memory) {
    Device d;
    d.name = std::move(name);
    d.kind = kind;
    d.peak_flops = flops;
    d.mem_bandwidth_bytes_per_s = 1e15;
    d.memory_bytes = memory;
    d.op_overhead_s = 0;
    return d;
  };
  spec.devices = {device("/cpu:0", DeviceKind::kCpu, 1e9, cpu_memory_bytes),
                  device("/gpu:0", DeviceKind::kGpu, 1e10, gpu_memory_bytes),
                  device("/gpu:1", DeviceKind::kGpu, 1e10, gpu_memory_bytes)};
  spec.default_link = Link{.bandwidth_bytes_per_s = 1e9, .latency_s = 0};
  return Cluster(spec, "test");
}

Op make_op(std::string name, std::vector<OpId> inputs, double flops, int64_t out_bytes,
           std::string colocate = "", int64_t param_bytes = 0) {
  Op op;
  op.name = std::move(name);
  op.type = flops > 0 ? "MatMul" : "Identity";
  for (OpId in : inputs) op.inputs.push_back({in, 0});
  op.flops = flops;
  op.bytes_accessed = 0.0;
  op.output_bytes = {out_bytes};
  op.colocate = std::move(colocate);
  op.param_bytes = param_bytes;
  return op;
}

// Two towers: x -> A1 -> A2 and x -> B1 -> B2, both towers feeding sinks S and T (so no op has a
// sole consumer). Tower A is colocated as "A" with 2 ms ops on a GPU, tower B as "B" with 1 ms
// ops; tensors are 1 KB (1 us transfers); x, S and T take no time. Five groups: x, A, B, S, T.
// Best: A on one GPU with x, S and T, B on the other GPU: step time exactly 4 ms (A's 2 + 2 ms; B
// and its transfers finish by 2.002 ms); moving x, S or T off A's GPU adds a 1 us transfer.
// Everything on one GPU takes 6 ms; any tower op on the CPU, at least 10 ms.
Graph two_tower_graph() {
  GraphBuilder b("two_towers", "test");
  const OpId x = b.add_op(make_op("x", {}, 0, 1000));
  const OpId a1 = b.add_op(make_op("A1", {x}, 2e7, 1000, "A"));
  const OpId a2 = b.add_op(make_op("A2", {a1}, 2e7, 1000, "A"));
  const OpId b1 = b.add_op(make_op("B1", {x}, 1e7, 1000, "B"));
  const OpId b2 = b.add_op(make_op("B2", {b1}, 1e7, 1000, "B"));
  b.add_op(make_op("S", {a2, b2}, 0, 1000));
  b.add_op(make_op("T", {a2, b2}, 0, 1000));
  return std::move(b).build();
}

// x -> A -> B -> S with A also feeding S, so the grouping gives {x, A} and {B, S}. A and B hold
// 6 GB of parameters each (GPUs have 10 GB) and A's output is 100 MB (100 ms over a link).
// Both groups on one GPU: 2 ms but out of memory. Split over the GPUs: >= 102 ms. Both on the
// CPU: 20 ms, the best feasible placement.
Graph oom_chain_graph() {
  GraphBuilder b("oom_chain", "test");
  const OpId x = b.add_op(make_op("x", {}, 0, 1000));
  const OpId a = b.add_op(make_op("A", {x}, 1e7, 100'000'000, "", 6'000'000'000));
  const OpId bb = b.add_op(make_op("B", {a}, 1e7, 1000, "", 6'000'000'000));
  b.add_op(make_op("S", {a, bb}, 0, 1000));
  return std::move(b).build();
}

struct Problem {
  Problem(Graph g, Cluster c)
      : graph(std::move(g)),
        cluster(std::move(c)),
        costs(graph, cluster),
        simulator(graph, cluster, costs) {}
  PlaceRequest request(uint64_t seed, std::map<std::string, std::string> params = {}) const {
    PlaceRequest r;
    r.graph = &graph;
    r.cluster = &cluster;
    r.costs = &costs;
    r.simulator = &simulator;
    r.seed = seed;
    r.budget_seconds = 600;
    r.params = std::move(params);
    return r;
  }
  Graph graph;
  Cluster cluster;
  CostTable costs;
  Simulator simulator;
};

std::unique_ptr<Problem> two_towers() {
  return std::make_unique<Problem>(two_tower_graph(), toy_cluster(int64_t{1} << 36));
}

// The toy graphs' spaces are small enough to be enumerated (RlOptions::enumerate); these tests
// are about the learning, so it is off unless a test sets it.
RlRun run(const Problem& p, uint64_t seed, std::map<std::string, std::string> params) {
  params.try_emplace("enumerate", "0");
  const RlOptions options = rl_options_from_params(params);
  return run_rl(p.request(seed, params), options);
}

TEST(RlPlacerTest, LearnsTwoTowerOptimumWithinAFewHundredSamples) {
  const auto p = two_towers();
  for (uint64_t seed : {1, 2, 3}) {
    const RlRun r = run(*p, seed, {{"samples", "480"}, {"batch", "8"}, {"threads", "1"}});
    EXPECT_EQ(r.num_groups, 5u);
    EXPECT_EQ(r.samples, 480);
    EXPECT_NEAR(r.best_step_time_s, 4e-3, 1e-12) << "seed " << seed;
    // The policy itself has learned it: its greedy decoding splits the towers too.
    // (x, S and T cost at most 1 us each when misplaced; the towers' split is what matters.)
    EXPECT_LT(r.greedy_step_time_s, 4.01e-3) << "seed " << seed;
    EXPECT_NEAR(p->simulator.run(r.result.placement).step_time_s, 4e-3, 1e-12);
    // The towers sit on different GPUs.
    const Placement& pl = r.result.placement;
    EXPECT_NE(pl[OpId(1)], pl[OpId(3)]);
    EXPECT_NE(pl[OpId(1)], DeviceId(0));
    EXPECT_NE(pl[OpId(3)], DeviceId(0));
  }
}

TEST(RlPlacerTest, LearningCurveImproves) {
  const auto p = two_towers();
  const RlRun r = run(*p, 5, {{"samples", "320"}, {"batch", "8"}});
  ASSERT_EQ(r.curve.size(), 40u);
  double first = 0;
  double last = 0;
  for (int i = 0; i < 5; ++i) first += r.curve[i].mean_step_time_s / 5;
  for (int i = 35; i < 40; ++i) last += r.curve[i].mean_step_time_s / 5;
  EXPECT_LT(last, 0.6 * first);
  EXPECT_LT(r.curve.back().entropy, r.curve.front().entropy);
}

void expect_same_learning(const std::vector<CurvePoint>& a, const std::vector<CurvePoint>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].update, b[i].update);
    EXPECT_EQ(a[i].samples, b[i].samples);
    EXPECT_EQ(a[i].mean_step_time_s, b[i].mean_step_time_s) << "update " << a[i].update;
    EXPECT_EQ(a[i].best_step_time_s, b[i].best_step_time_s) << "update " << a[i].update;
    EXPECT_EQ(a[i].entropy, b[i].entropy) << "update " << a[i].update;
    EXPECT_EQ(a[i].baseline, b[i].baseline) << "update " << a[i].update;
  }
}

TEST(RlPlacerTest, SameSeedGivesSameRunForAnyThreadCount) {
  const auto p = two_towers();
  const RlRun a = run(*p, 7, {{"samples", "96"}, {"batch", "8"}, {"threads", "1"}});
  const RlRun b = run(*p, 7, {{"samples", "96"}, {"batch", "8"}, {"threads", "1"}});
  const RlRun c = run(*p, 7, {{"samples", "96"}, {"batch", "8"}, {"threads", "2"}});
  expect_same_learning(a.curve, b.curve);
  expect_same_learning(a.curve, c.curve);
  EXPECT_EQ(a.result.placement, b.result.placement);
  EXPECT_EQ(a.result.placement, c.result.placement);
  EXPECT_EQ(a.greedy_group_devices, c.greedy_group_devices);
  // Chunks of 3 samples decoded and back-propagated on 1 or 2 threads (3 + 5 in the first update,
  // 3 + 3 + 3 once the best placement rides along).
  const RlRun e = run(*p, 7, {{"samples", "96"}, {"batch", "8"}, {"chunk", "3"}, {"threads", "1"}});
  const RlRun f = run(*p, 7, {{"samples", "96"}, {"batch", "8"}, {"chunk", "3"}, {"threads", "2"}});
  expect_same_learning(e.curve, f.curve);
  EXPECT_EQ(e.result.placement, f.result.placement);
  // Another seed explores differently.
  const RlRun d = run(*p, 8, {{"samples", "96"}, {"batch", "8"}});
  bool differs = false;
  for (size_t i = 0; i < a.curve.size(); ++i) {
    differs = differs || a.curve[i].mean_step_time_s != d.curve[i].mean_step_time_s;
  }
  EXPECT_TRUE(differs);
}

std::string temp_path(const std::string& name) {
  return scratch_path(name + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
}

TEST(RlPlacerTest, ResumingFromCheckpointContinuesTheSameRun) {
  const auto p = two_towers();
  const std::string ckpt = temp_path("rl-ckpt");
  const std::string curve = temp_path("rl-curve");
  std::filesystem::remove(ckpt);
  std::filesystem::remove(curve);
  const RlRun straight = run(*p, 11, {{"samples", "96"}, {"batch", "8"}});

  const RlRun first =
      run(*p, 11, {{"samples", "48"}, {"batch", "8"}, {"checkpoint", ckpt}, {"curve", curve}});
  EXPECT_FALSE(first.resumed);
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  // Rows a run interrupted after its last checkpoint wrote are dropped and redone on resuming.
  {
    std::ofstream stale(curve, std::ios::app);
    stale << "7,56,0,0,0,0,0,0,0,0,0,0,1,merged\n8,64,0,0,0,0,0,0,0,0,0,0,1,merged\n";
  }
  const RlRun second =
      run(*p, 11, {{"samples", "96"}, {"batch", "8"}, {"checkpoint", ckpt}, {"curve", curve}});
  EXPECT_TRUE(second.resumed);
  EXPECT_EQ(second.samples, 96);
  EXPECT_EQ(second.updates, 12);
  ASSERT_EQ(second.curve.size(), 6u);
  expect_same_learning(std::vector<CurvePoint>(straight.curve.begin() + 6, straight.curve.end()),
                       second.curve);
  EXPECT_EQ(second.result.placement, straight.result.placement);
  EXPECT_EQ(second.best_step_time_s, straight.best_step_time_s);

  // The CSV holds a header and all 12 updates once each, across both runs.
  std::ifstream in(curve);
  std::string line;
  std::getline(in, line);
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_EQ(line.substr(0, line.find(',')), std::to_string(lines)) << line;
  }
  EXPECT_EQ(lines, 12);

  // Already at 96 samples: a third run only reloads and returns the same best.
  const RlRun third = run(*p, 11, {{"samples", "96"}, {"batch", "8"}, {"checkpoint", ckpt}});
  EXPECT_TRUE(third.curve.empty());
  EXPECT_EQ(third.best_step_time_s, straight.best_step_time_s);

  // A checkpoint of another seed is refused.
  EXPECT_THROW(run(*p, 12, {{"samples", "96"}, {"batch", "8"}, {"checkpoint", ckpt}}), ConfigError);
  // So is one of a graph or cluster edited under the same name: names alone used to match.
  const auto refused = [&](const Problem& changed) {
    try {
      run(changed, 11, {{"samples", "96"}, {"batch", "8"}, {"checkpoint", ckpt}});
    } catch (const ConfigError& e) {
      return std::string(e.what()).find("made for another graph, cluster") != std::string::npos;
    }
    return false;
  };
  const Problem smaller_gpus(two_tower_graph(), toy_cluster(int64_t{1} << 35));
  EXPECT_TRUE(refused(smaller_gpus));
  Graph edited = two_tower_graph();
  GraphBuilder b("two_towers", "test");
  for (size_t o = 0; o < edited.num_ops(); ++o) {
    Op op = edited.op(OpId::from_index(o));
    if (op.name == "B2") op.flops *= 2;
    b.add_op(std::move(op));
  }
  const Problem slower_b2(std::move(b).build(), toy_cluster(int64_t{1} << 36));
  EXPECT_TRUE(refused(slower_b2));
  // Or with an edge moved: T reads B1 instead of B2 (same ops, figures and groups).
  GraphBuilder rewired("two_towers", "test");
  for (size_t o = 0; o < edited.num_ops(); ++o) {
    Op op = edited.op(OpId::from_index(o));
    if (op.name == "T") op.inputs[1] = {*edited.find_op("B1"), 0};
    rewired.add_op(std::move(op));
  }
  const Problem t_reads_b1(std::move(rewired).build(), toy_cluster(int64_t{1} << 36));
  EXPECT_TRUE(refused(t_reads_b1));
  // Or resumed with another reward source: the simulator's best time against measured ones.
  try {
    run(*p, 11,
        {{"samples", "96"},
         {"batch", "8"},
         {"checkpoint", ckpt},
         {"measure-cmd", "echo 0.5 # {placement}"}});
    ADD_FAILURE() << "resumed with a measure-cmd";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("or reward source (the simulator or a measure-cmd)"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove(ckpt);
  std::filesystem::remove(curve);
}

// A checkpoint or curve that cannot be written is refused before the run spends its budget (it
// used to fail at the first write, after 25 or 50 updates), and so is a curve that fills a disk.
TEST(RlPlacerTest, UnwritableCheckpointOrCurveIsRefusedAtTheStart) {
  const auto p = two_towers();
  auto error_of = [&](const std::string& key, const std::string& path) {
    try {
      run(*p, 11, {{"samples", "8"}, {"batch", "8"}, {key, path}});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("checkpoint", "/nonexistent-dplace-dir/x.ckpt"),
            "--param checkpoint=/nonexistent-dplace-dir/x.ckpt: no directory "
            "'/nonexistent-dplace-dir'");
  EXPECT_EQ(error_of("checkpoint", "/dev/null"),
            "--param checkpoint=/dev/null: not a regular file");
  EXPECT_NE(error_of("curve", "/nonexistent-dplace-dir/c.csv")
                .find("--param curve=/nonexistent-dplace-dir/c.csv: cannot write the file"),
            std::string::npos);
  EXPECT_NE(error_of("curve", "/dev/full").find("--param curve=/dev/full: cannot write the file"),
            std::string::npos);
}

// A damaged checkpoint is a ConfigError naming the file, never a crash (LibTorch's own reader can
// crash on some damage, so the file's checksum is checked first).
TEST(RlPlacerTest, DamagedCheckpointIsAConfigError) {
  const auto p = two_towers();
  const std::string ckpt = temp_path("rl-ckpt-damaged");
  std::filesystem::remove(ckpt);
  run(*p, 11, {{"samples", "16"}, {"batch", "8"}, {"checkpoint", ckpt}});
  std::string good;
  {
    std::ifstream in(ckpt, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(good.size(), 1000u);
  auto rejects = [&](const std::string& bytes, const std::string& needle) {
    std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << bytes;
    try {
      run(*p, 11, {{"samples", "32"}, {"batch", "8"}, {"checkpoint", ckpt}});
      ADD_FAILURE() << "expected ConfigError for " << needle;
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(ckpt), std::string::npos) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x5a;
  rejects(flipped, "does not match its checksum");
  rejects(good.substr(0, good.size() - 100), "bytes of payload, the header says");
  rejects("PK\x03\x04 an archive without dplace's header", "not a dplace rl checkpoint");
  rejects("", "not a dplace rl checkpoint");
  // A directory where the file should be.
  const std::string dir = temp_path("rl-ckpt-dir");
  std::filesystem::create_directories(dir);
  try {
    run(*p, 11, {{"samples", "8"}, {"batch", "8"}, {"checkpoint", dir}});
    ADD_FAILURE() << "a directory was read as a checkpoint";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  std::filesystem::remove(dir);
  std::filesystem::remove(ckpt);
}

// Runs `params` (with an even "samples") to half its samples with a checkpoint, then resumes
// from it to the end; returns the resumed run.
RlRun run_resumed_half_way(const Problem& p, uint64_t seed,
                           const std::map<std::string, std::string>& params,
                           const std::string& name) {
  const std::string ckpt = temp_path(name);
  std::filesystem::remove(ckpt);
  auto half = params;
  half["samples"] = std::to_string(std::stoll(params.at("samples")) / 2);
  half["checkpoint"] = ckpt;
  run(p, seed, half);
  auto rest = params;
  rest["checkpoint"] = ckpt;
  RlRun resumed = run(p, seed, rest);
  std::filesystem::remove(ckpt);
  return resumed;
}

TEST(RlPlacerTest, RestartsAConvergedPolicyAndKeepsTheBest) {
  const auto p = two_towers();
  const std::map<std::string, std::string> params = {
      {"samples", "960"}, {"batch", "8"}, {"restart-patience", "5"}, {"restart-entropy", "0.1"}};
  const RlRun r = run(*p, 4, params);
  ASSERT_GE(r.curve.back().restarts, 1);
  EXPECT_NEAR(r.best_step_time_s, 4e-3, 1e-12);
  // The update that restarts has converged; the next one samples from fresh weights, whose
  // entropy is back near the start's.
  for (size_t i = 1; i + 1 < r.curve.size(); ++i) {
    if (r.curve[i].restarts != r.curve[i - 1].restarts) {
      EXPECT_LT(r.curve[i].entropy, 0.1);
      EXPECT_GT(r.curve[i + 1].entropy, 0.5 * r.curve.front().entropy) << "update " << i + 2;
    }
  }
  // Restarts are part of the resumable state: stopping at 480 samples and resuming gives the
  // same run as going straight to 960.
  const RlRun resumed = run_resumed_half_way(*p, 4, params, "rl-restart-ckpt");
  EXPECT_TRUE(resumed.resumed);
  expect_same_learning(std::vector<CurvePoint>(r.curve.begin() + 60, r.curve.end()), resumed.curve);
  EXPECT_EQ(resumed.curve.back().restarts, r.curve.back().restarts);
}

TEST(RlPlacerTest, RefinesThroughNestedLevelsAndRestartsFromTheCoarsest) {
  const auto p = two_towers();
  // Levels of 2 and 4 groups (from the 5 colocation groups); converging quickly moves on.
  const std::map<std::string, std::string> params = {
      {"samples", "960"},        {"batch", "8"},
      {"groups", "4"},           {"levels", "2"},
      {"restart-patience", "5"}, {"restart-entropy", "0.1"}};
  const RlRun r = run(*p, 4, params);
  EXPECT_EQ(r.level_groups.front(), (std::vector<size_t>{2, 4}));
  EXPECT_EQ(r.num_groups, 4u);
  EXPECT_EQ(r.best_group_devices.size(), 4u);
  ASSERT_GE(r.refinements, 2);
  ASSERT_GE(r.curve.back().restarts, 1);
  EXPECT_EQ(r.curve.front().level, 0);
  // The towers end up on different GPUs (x, S and T cost 1 us each when misplaced).
  EXPECT_LT(r.best_step_time_s, 4.01e-3);
  const Placement& pl = r.result.placement;
  EXPECT_NE(pl[OpId(1)], pl[OpId(3)]);
  EXPECT_NE(pl[OpId(1)], DeviceId(0));
  EXPECT_NE(pl[OpId(3)], DeviceId(0));
  bool saw_refinement = false;
  for (size_t i = 1; i < r.curve.size(); ++i) {
    const CurvePoint& before = r.curve[i - 1];
    const CurvePoint& now = r.curve[i];
    if (now.level == before.level) continue;
    if (now.level == 1) {
      // A refinement: the finer policy starts from the best placement (fitted to it), so its
      // first batch is nearly settled on it, and the best is kept.
      saw_refinement = true;
      EXPECT_EQ(now.restarts, before.restarts);
      EXPECT_LT(now.entropy, 0.1) << "update " << now.update;
      EXPECT_LE(now.best_step_time_s, before.best_step_time_s);
    } else {
      // From the finest level back to the coarsest: a restart with fresh weights (counted by the
      // update that converged).
      EXPECT_EQ(now.level, 0);
      ASSERT_GE(i, 2u);
      EXPECT_EQ(before.restarts, r.curve[i - 2].restarts + 1);
      EXPECT_GT(now.entropy, 0.5 * r.curve.front().entropy) << "update " << now.update;
    }
  }
  EXPECT_TRUE(saw_refinement);
  // The same run on two threads, and resumed from a checkpoint taken half way.
  auto two = params;
  two["threads"] = "2";
  const RlRun r2 = run(*p, 4, two);
  expect_same_learning(r.curve, r2.curve);
  const RlRun resumed = run_resumed_half_way(*p, 4, params, "rl-levels-ckpt");
  EXPECT_TRUE(resumed.resumed);
  expect_same_learning(std::vector<CurvePoint>(r.curve.begin() + 60, r.curve.end()), resumed.curve);
  EXPECT_EQ(resumed.refinements, r.refinements);
  EXPECT_EQ(resumed.result.placement, r.result.placement);
}

// Two weights, each read by two forward matmuls of a chain: x -> M1 -> M2 -> M3 -> M4 -> S,
// W1 feeding M1 and M2, W2 feeding M3 and M4.
Graph shared_weight_graph() {
  GraphBuilder b("shared_weights", "test");
  auto add = [&b](Op op) {
    op.phase = Phase::kForward;
    return b.add_op(std::move(op));
  };
  const OpId x = add(make_op("x", {}, 0, 1000));
  const OpId w1 = add(make_op("W1", {}, 0, 1'000'000, "", 1'000'000));
  const OpId w2 = add(make_op("W2", {}, 0, 1'000'000, "", 1'000'000));
  const OpId m1 = add(make_op("M1", {x, w1}, 1e7, 1000));
  const OpId m2 = add(make_op("M2", {m1, w1}, 1e7, 1000));
  const OpId m3 = add(make_op("M3", {m2, w2}, 1e7, 1000));
  const OpId m4 = add(make_op("M4", {m3, w2}, 1e7, 1000));
  add(make_op("S", {m4}, 0, 1000));
  return std::move(b).build();
}

// With shared-weights=apart the weights' groups never merge, so a target of 2 groups leaves 3
// (W1, W2, and the chain); merged, the cap reaches 2.
TEST(RlPlacerTest, SharedWeightGroupsStayApart) {
  const Problem p(shared_weight_graph(), toy_cluster(int64_t{1} << 36));
  std::map<std::string, std::string> params = {
      {"samples", "16"}, {"batch", "8"}, {"groups", "2"}, {"levels", "1"}, {"polish", "0"}};
  params["shared-weights"] = "merged";
  EXPECT_EQ(run(p, 1, params).level_groups, (std::vector<std::vector<size_t>>{{2}}));
  params["shared-weights"] = "apart";
  EXPECT_EQ(run(p, 1, params).level_groups, (std::vector<std::vector<size_t>>{{3}}));
  // Without shared weights "apart" is the one grouping there is, reported once (it was listed,
  // and taken in turn at restarts, as two).
  const auto towers = two_towers();
  const RlRun r = run(*towers, 1, params);
  EXPECT_EQ(r.groupings, std::vector<std::string>{"merged"});
  EXPECT_EQ(r.result.note.find("apart"), std::string::npos) << r.result.note;
}

// shared-weights=alternate on shared_weight_graph(): both groupings, one per restart in turn
// (merged first); the best placement is kept on the groups nested in both, and survives a resume.
TEST(RlPlacerTest, AlternateGroupingsTakeTurnsAtRestarts) {
  const Problem p(shared_weight_graph(), toy_cluster(int64_t{1} << 36));
  const std::map<std::string, std::string> params = {{"samples", "480"},
                                                     {"batch", "8"},
                                                     {"groups", "2"},
                                                     {"levels", "1"},
                                                     {"polish", "0"},
                                                     {"restart-patience", "3"},
                                                     {"restart-entropy", "0.5"},
                                                     {"entropy", "0"},
                                                     {"shared-weights", "alternate"}};
  const RlRun r = run(p, 2, params);
  EXPECT_EQ(r.groupings, (std::vector<std::string>{"merged", "apart"}));
  EXPECT_EQ(r.level_groups, (std::vector<std::vector<size_t>>{{2}, {3}}));
  EXPECT_GE(r.base_groups, 3u);
  EXPECT_EQ(r.best_group_devices.size(), r.base_groups);
  ASSERT_GE(r.curve.back().restarts, 2);
  std::set<int> sampled;
  for (size_t i = 0; i < r.curve.size(); ++i) {
    const int64_t restarts_before = i == 0 ? 0 : r.curve[i - 1].restarts;
    EXPECT_EQ(r.curve[i].grouping, restarts_before % 2) << "update " << i + 1;
    sampled.insert(r.curve[i].grouping);
  }
  EXPECT_EQ(sampled, (std::set<int>{0, 1}));
  // The best placement is the best sample of either grouping: no update's batch beat it.
  for (const CurvePoint& c : r.curve) EXPECT_LE(r.best_step_time_s, c.batch_best_step_time_s);
  EXPECT_NEAR(p.simulator.run(r.result.placement).step_time_s, r.best_step_time_s, 1e-12);
  const RlRun resumed = run_resumed_half_way(p, 2, params, "rl-alternate-ckpt");
  EXPECT_EQ(resumed.result.placement, r.result.placement);
  EXPECT_EQ(resumed.curve.back().restarts, r.curve.back().restarts);

  // A graph without shared weights has one grouping.
  EXPECT_EQ(run(*two_towers(), 1, {{"samples", "16"}, {"shared-weights", "alternate"}}).groupings,
            (std::vector<std::string>{"merged"}));
}

TEST(RlPlacerTest, OomPenaltySteersAwayFromOutOfMemoryPlacements) {
  Problem p(oom_chain_graph(), toy_cluster(10'000'000'000));
  // Both groups on /gpu:0 is fastest (2 ms) but needs 12 GB of a 10 GB GPU.
  Placement fast;
  fast.device_of_op.assign(4, DeviceId(1));
  const SimResult sim_fast = p.simulator.run(fast);
  ASSERT_FALSE(sim_fast.feasible);
  ASSERT_NEAR(sim_fast.step_time_s, 2e-3, 1e-9);

  // With the default penalty the best feasible placement, both groups on the CPU (20 ms), wins.
  // (The paper's full sole-consumer merge gives the two groups this test is built around.)
  const RlRun r = run(p, 3, {{"samples", "160"}, {"batch", "8"}, {"sole-consumer", "full"}});
  EXPECT_EQ(r.num_groups, 2u);
  EXPECT_TRUE(r.best_feasible);
  const SimResult sim = p.simulator.run(r.result.placement);
  EXPECT_TRUE(sim.feasible);
  EXPECT_NEAR(sim.step_time_s, 20e-3, 1e-9);
  EXPECT_NEAR(r.greedy_step_time_s, 20e-3, 1e-9);

  // An oom-time below a fitting step time would rank OOM placements first (0.1 ms against the
  // CPU's 20 ms: an OOM placement was returned while fitting ones were sampled). It rises to twice
  // the fitting time that exceeds it, and the note says so.
  const RlRun cheap = run(
      p, 3, {{"samples", "160"}, {"batch", "8"}, {"sole-consumer", "full"}, {"oom-time", "1e-4"}});
  EXPECT_TRUE(cheap.best_feasible);
  EXPECT_NEAR(cheap.best_step_time_s, 20e-3, 1e-9);
  EXPECT_NE(cheap.result.note.find("oom-time 100 us was raised to"), std::string::npos)
      << cheap.result.note;
  // An oom-time above every fitting time stays as given.
  const RlRun dear =
      run(p, 3, {{"samples", "160"}, {"batch", "8"}, {"sole-consumer", "full"}, {"oom-time", "1"}});
  EXPECT_TRUE(dear.best_feasible);
  EXPECT_EQ(dear.result.note.find("oom-time"), std::string::npos) << dear.result.note;
}

// The note names a warm start that is OOM as such (it gave the OOM charge as its step time).
TEST(RlPlacerTest, AnOutOfMemoryWarmStartIsNamedSo) {
  Problem p(oom_chain_graph(), toy_cluster(10'000'000'000));
  Placement fast;  // both groups on /gpu:0: 2 ms, out of memory
  fast.device_of_op.assign(4, DeviceId(1));
  std::map<std::string, std::string> params = {
      {"enumerate", "0"}, {"samples", "16"}, {"batch", "8"}, {"init", "expert"}};
  PlaceRequest request = p.request(3, params);
  request.expert = fast;
  const RlRun r = run_rl(request, rl_options_from_params(params));
  EXPECT_NE(r.result.note.find("; warm start (expert on the groups) OOM"), std::string::npos)
      << r.result.note;
}

// When no placement fits, the one returned is the OOM placement with the least memory over
// capacity in all, then the shortest step: all OOM placements are charged alike,
// so the first seen was returned (every op on the slow CPU, as far over as the GPU).
TEST(RlPlacerTest, WhenNothingFitsTheLeastOverflowingPlacementIsReturned) {
  GraphBuilder b("one", "test");
  b.add_op(make_op("x", {}, 1e7, 4096, "", 1024));
  const Problem p(std::move(b).build(), toy_cluster(1, 1));
  for (const char* enumerate : {"256", "0"}) {
    SCOPED_TRACE(enumerate);
    const RlRun r = run(p, 1, {{"enumerate", enumerate}, {"samples", "16"}, {"batch", "8"}});
    EXPECT_FALSE(r.best_feasible);
    // Every device overflows by the same 5,119 B; x takes 10 ms on /cpu:0, 1 ms on a GPU.
    EXPECT_NE(r.result.placement.device_of_op[0], DeviceId(0));
  }
}

TEST(RlPlacerTest, OptionsAreValidated) {
  EXPECT_THROW(rl_options_from_params({{"grups", "10"}}), ConfigError);
  EXPECT_THROW(rl_options_from_params({{"groups", "0"}}), ConfigError);
  EXPECT_THROW(rl_options_from_params({{"lr", "fast"}}), ConfigError);
  EXPECT_THROW(rl_options_from_params({{"baseline-decay", "1"}}), ConfigError);
  EXPECT_THROW(rl_options_from_params({{"shared-weights", "together"}}), ConfigError);
  // A timeout too long for the steady clock's deadline arithmetic (inf is refused as not finite).
  EXPECT_THROW(rl_options_from_params({{"measure-timeout", "1e300"}}), ConfigError);
  EXPECT_EQ(rl_options_from_params({{"measure-timeout", "0"}}).measure_timeout_s, 0);
  // An empty file name or command (an unset shell variable) used to turn the option off silently.
  for (const char* key : {"curve", "checkpoint", "measure-cmd"}) {
    EXPECT_THROW(rl_options_from_params({{key, ""}}), ConfigError) << key;
  }
  try {
    rl_options_from_params({{"curve", ""}});
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "placer 'rl': --param curve=: expected a file name");
  }
  // Values past what an int option can hold used to wrap around (batch=2^31 became negative).
  for (const char* key : {"batch", "levels", "hidden", "embedding", "threads", "chunk"}) {
    EXPECT_THROW(rl_options_from_params({{key, "2147483648"}}), ConfigError) << key;
  }
  try {
    rl_options_from_params({{"batch", "2147483648"}});
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "placer 'rl': --param batch=2147483648: expected an integer in [1, 1024]");
  }
  // Values the parser took that then aborted the run (lr past a float; an entropy or imitation
  // weight whose gradients overflowed the policy; an oom-time whose reward overflowed), a group
  // count the grouping would round up, numbers with leading blanks, and hexadecimal.
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"lr", "1e38"},
                                                        {"lr", "2"},
                                                        {"entropy", "1e39"},
                                                        {"entropy-final", "101"},
                                                        {"imitation", "1e39"},
                                                        {"groups", "1"},
                                                        {"hidden", "1025"},
                                                        {"groups", " 5"},
                                                        {"lr", " 0.1"},
                                                        {"lr", "0x1p-4"},
                                                        {"oom-time", "1e305"}}) {
    EXPECT_THROW(rl_options_from_params({{key, value}}), ConfigError) << key << "=" << value;
  }
  EXPECT_DOUBLE_EQ(rl_options_from_params({{"lr", "1"}}).learning_rate, 1.0);
  const RlOptions o = rl_options_from_params({{"groups", "64"}, {"lr", "0.003"}});
  EXPECT_EQ(o.groups, 64u);
  EXPECT_DOUBLE_EQ(o.learning_rate, 0.003);
  try {
    rl_options_from_params({{"grups", "10"}});
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'grups'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("groups"), std::string::npos) << e.what();
  }
}

// Five groups on three devices make 243 placements: by default they are all evaluated, nothing is
// learned, and the best is the optimum. A sample cap below the space, or enumerate=0, learns.
TEST(RlPlacerTest, EnumeratesASpaceOfAFewHundredPlacements) {
  const auto p = two_towers();
  const RlRun r = run(*p, 1, {{"enumerate", "256"}});
  EXPECT_EQ(r.enumerated, 243);
  EXPECT_EQ(r.enumerated_evaluated, 243);
  EXPECT_EQ(r.evaluations, 243);
  EXPECT_EQ(r.samples, 243);
  EXPECT_EQ(r.updates, 0);
  EXPECT_TRUE(r.curve.empty());
  EXPECT_DOUBLE_EQ(r.best_step_time_s, 4e-3);
  EXPECT_DOUBLE_EQ(p->simulator.run(r.result.placement).step_time_s, 4e-3);
  EXPECT_NE(r.result.note.find("only 243 placements of the 5 groups"), std::string::npos)
      << r.result.note;
  EXPECT_LT(r.seconds, 10.0);  // not the 600-s budget

  // The budget also ends an enumeration (a slow measure-cmd); the note says how far it got.
  PlaceRequest hurried = p->request(1, {{"enumerate", "256"}});
  hurried.budget_seconds = 1e-9;
  const RlRun cut = run_rl(hurried, rl_options_from_params(hurried.params));
  EXPECT_EQ(cut.enumerated, 243);
  EXPECT_EQ(cut.enumerated_evaluated, 0);
  EXPECT_NE(cut.result.note.find("0 evaluated before --budget-seconds ran out"), std::string::npos)
      << cut.result.note;
  // An enumeration has no greedy decoding to speak of (a measured one cut by the budget said "the
  // final greedy placement was not measured").
  PlaceRequest measured = p->request(
      1, {{"enumerate", "256"}, {"measure-cmd", "sleep 0.05; echo 0.001 # {placement}"}});
  measured.budget_seconds = 0.3;
  const RlRun partly = run_rl(measured, rl_options_from_params(measured.params));
  EXPECT_EQ(partly.enumerated, 243);
  EXPECT_EQ(partly.result.note.find("greedy"), std::string::npos) << partly.result.note;

  EXPECT_EQ(run(*p, 1, {{"enumerate", "242"}, {"samples", "16"}}).enumerated, 0);
  EXPECT_EQ(run(*p, 1, {{"enumerate", "256"}, {"samples", "16"}}).enumerated, 0);
  EXPECT_EQ(run(*p, 1, {{"samples", "16"}}).enumerated, 0);

  // One op: the registered placer returns at once, unpolished (its moves are the same choice).
  GraphBuilder b("lone", "test");
  b.add_op(make_op("mm", {}, 1e7, 1000));
  const Problem lone(std::move(b).build(), toy_cluster(int64_t{1} << 36));
  const PlaceResult placed = make_placer("rl")->place(lone.request(1));
  EXPECT_DOUBLE_EQ(lone.simulator.run(placed.placement).step_time_s, 1e-3);
  EXPECT_NE(placed.note.find("only 3 placements of the 1 group "), std::string::npos)
      << placed.note;
  EXPECT_NE(placed.note.find("no polishing"), std::string::npos) << placed.note;
}

TEST(RlPlacerTest, IsRegistered) {
  const auto p = two_towers();
  std::unique_ptr<Placer> placer = make_placer("rl");
  PlaceRequest req = p->request(1, {{"samples", "16"}, {"batch", "8"}, {"polish", "0"}});
  const PlaceResult r = placer->place(req);
  EXPECT_EQ(r.evaluations, 17);  // 16 samples + the final greedy decoding
  EXPECT_EQ(r.placement.device_of_op.size(), 7u);
  EXPECT_EQ(r.note.find("polished"), std::string::npos) << r.note;
}

// Capped at two groups, the grouping joins x, S and T to the towers so that the best placement
// the policy can express is 4.002 ms (a 1 us transfer more per misplaced op than the optimum).
// The registered placer then polishes by annealing over the colocation groups, which moves them to
// tower A's GPU: the optimum, 4 ms.
TEST(RlPlacerTest, PolishingSplitsWhatTheGroupsJoin) {
  const auto p = two_towers();
  std::map<std::string, std::string> params = {
      {"samples", "32"}, {"batch", "8"}, {"groups", "2"}, {"levels", "1"}, {"polish", "0"}};
  const PlaceResult learned = make_placer("rl")->place(p->request(1, params));
  EXPECT_NEAR(p->simulator.run(learned.placement).step_time_s, 4.002e-3, 1e-12);

  params["polish"] = "300";
  params["polish-rounds"] = "1";
  const PlaceResult polished = make_placer("rl")->place(p->request(1, params));
  const SimResult sim = p->simulator.run(polished.placement);
  EXPECT_TRUE(sim.feasible);
  EXPECT_NEAR(sim.step_time_s, 4e-3, 1e-12);
  EXPECT_NE(polished.placement[OpId(1)], polished.placement[OpId(3)]);
  EXPECT_NE(polished.note.find("learned 0.004002 s, polished 0.004 s"), std::string::npos)
      << polished.note;
  // The learning's evaluations, the start's simulation, the five whole-device moves (each GPU's
  // groups onto the CPU and onto the other GPU, the swap of the GPUs; the CPU is empty) and the
  // 300 moves.
  EXPECT_EQ(polished.evaluations, learned.evaluations + 1 + 5 + 300);
  // Seeded: the same run again gives the same placement.
  EXPECT_EQ(make_placer("rl")->place(p->request(1, params)).placement, polished.placement);
}

// By default the polishing goes on in waves of two rounds (anneal's temperature and a hotter one)
// from the best so far. Here the first wave finds the optimum and the second nothing faster, which
// ends the polishing after four rounds, the same with one thread as with two.
TEST(RlPlacerTest, PolishingStopsAfterAWaveWithoutProgress) {
  const auto p = two_towers();
  std::map<std::string, std::string> params = {{"samples", "32"}, {"batch", "8"},
                                               {"groups", "2"},   {"levels", "1"},
                                               {"polish", "0"},   {"threads", "1"}};
  const PlaceResult learned = make_placer("rl")->place(p->request(1, params));
  params["polish"] = "300";
  const PlaceResult one_thread = make_placer("rl")->place(p->request(1, params));
  EXPECT_NEAR(p->simulator.run(one_thread.placement).step_time_s, 4e-3, 1e-12);
  EXPECT_NE(one_thread.note.find("(whole-device moves: none 1% faster; 4 rounds of 300 moves"),
            std::string::npos)
      << one_thread.note;
  EXPECT_NE(one_thread.note.find("the best from round 1:"), std::string::npos) << one_thread.note;
  // The start's simulation, the five whole-device moves and four rounds' moves.
  EXPECT_EQ(one_thread.evaluations, learned.evaluations + 1 + 5 + 4 * 300);

  params["threads"] = "2";
  const PlaceResult two_threads = make_placer("rl")->place(p->request(1, params));
  EXPECT_EQ(two_threads.placement, one_thread.placement);
  EXPECT_EQ(two_threads.evaluations, one_thread.evaluations);

  // polish-rounds caps the rounds: one wave.
  params["polish-rounds"] = "2";
  const PlaceResult capped = make_placer("rl")->place(p->request(1, params));
  EXPECT_NE(capped.note.find("(whole-device moves: none 1% faster; 2 rounds of 300 moves"),
            std::string::npos)
      << capped.note;
  EXPECT_EQ(capped.evaluations, learned.evaluations + 1 + 5 + 2 * 300);
}

// Polishing keeps a placement that fits: on the OOM chain the fast placements are all OOM, and the
// polished result is still the best fitting one (both groups on the CPU, 20 ms).
TEST(RlPlacerTest, PolishingKeepsAFittingPlacement) {
  Problem p(oom_chain_graph(), toy_cluster(10'000'000'000));
  const PlaceResult r = make_placer("rl")->place(p.request(
      3, {{"samples", "160"}, {"batch", "8"}, {"sole-consumer", "full"}, {"polish", "500"}}));
  const SimResult sim = p.simulator.run(r.placement);
  EXPECT_TRUE(sim.feasible);
  EXPECT_NEAR(sim.step_time_s, 20e-3, 1e-9);
  EXPECT_TRUE(r.infeasible_reason.empty()) << r.infeasible_reason;
}

TEST(RlPlacerTest, PolishingIsOffForMeasuredRewards) {
  EXPECT_EQ(rl_options_from_params({{"measure-cmd", "true"}}).polish_evaluations, 0);
  EXPECT_EQ(rl_options_from_params({}).polish_evaluations, -1);
  EXPECT_THROW(rl_options_from_params({{"measure-cmd", "true"}, {"polish", "100"}}), ConfigError);
  EXPECT_THROW(rl_options_from_params({{"polish-share", "1"}}), ConfigError);
  EXPECT_THROW(rl_options_from_params({{"polish", "-5"}}), ConfigError);
  EXPECT_THROW(rl_options_from_params({{"polish-rounds", "0"}}), ConfigError);
}

// A policy whose passes would hold more than half of the machine's memory is refused at the
// start (hidden 1,024 and batch 1,024 over 256 groups took 21 GB), naming what to lower. 3,000
// independent ops and groups=3000: about 300 GB at those sizes, more than any test machine has.
TEST(RlPlacerTest, APolicyTooLargeForTheMachinesMemoryIsRefused) {
  GraphBuilder b("wide", "test");
  const OpId x = b.add_op(make_op("x", {}, 0, 1000));
  for (int i = 0; i < 3000; ++i) b.add_op(make_op("m" + std::to_string(i), {x}, 1e6, 1000));
  const Problem p(std::move(b).build(), toy_cluster(int64_t{1} << 36));
  const int64_t machine_bytes = int64_t{sysconf(_SC_PHYS_PAGES)} * sysconf(_SC_PAGE_SIZE);
  if (machine_bytes / 2 > int64_t{313'000'000'000}) GTEST_SKIP() << "a machine of over 626 GB";
  try {
    run(p, 1, {{"groups", "3000"}, {"levels", "1"}, {"hidden", "1024"}, {"batch", "1024"}});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("a batch of 1024 samples over 3000 groups at hidden 1024 needs about"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("lower --param batch, hidden or groups"), std::string::npos);
  }
  // The same sizes on the two-tower graph's five groups need about 0.4 GB: allowed (its 243
  // placements are then enumerated, so no policy pass runs).
  const auto towers = two_towers();
  const std::map<std::string, std::string> params = {{"hidden", "1024"}, {"batch", "1024"}};
  EXPECT_NO_THROW(run_rl(towers->request(1, params), rl_options_from_params(params)));
}

// A budget spent before anything was sampled or decoded leaves no placement from the policy: the
// expert placement is returned, or without one every group on the first device it may use
// (evaluated too, and with a measure-cmd killed at once,
// since the budget is spent, so charged as OOM, which the note explains), instead of an empty best
// placement (a crash with measure-cmd before) or a greedy decoding without a time limit (38 s past
// a 2-s budget at hidden 1,024 over 4,096 groups).
TEST(RlPlacerTest, ABudgetSpentBeforeTheFirstPassReturnsTheExpertOrTheFirstDevices) {
  const auto p = two_towers();
  for (const char* command : {"", "echo 0.001"}) {
    SCOPED_TRACE(command);
    std::map<std::string, std::string> params = {{"enumerate", "0"}};
    if (*command) params["measure-cmd"] = std::string(command) + " {placement}";
    PlaceRequest request = p->request(1, params);
    request.budget_seconds = 1e-9;
    const RlRun r = run_rl(request, rl_options_from_params(params));
    EXPECT_EQ(r.samples, 0);
    EXPECT_TRUE(r.greedy_abandoned);
    EXPECT_EQ(r.fallback, "every group on the first device it may use");
    ASSERT_EQ(r.result.placement.device_of_op.size(), p->graph.num_ops());
    for (DeviceId d : r.result.placement.device_of_op) EXPECT_EQ(d, DeviceId(0));
    EXPECT_NE(r.result.note.find("nothing was sampled or decoded within the budget: returned every "
                                 "group on the first device it may use"),
              std::string::npos)
        << r.result.note;
    if (*command) {
      EXPECT_NE(r.result.note.find("nothing was measured before --budget-seconds ran out"),
                std::string::npos)
          << r.result.note;
    }
  }
  // With an expert placement, that is what is returned (every op on /gpu:1 here).
  std::map<std::string, std::string> params = {{"enumerate", "0"}};
  PlaceRequest request = p->request(1, params);
  request.budget_seconds = 1e-9;
  request.expert = single_device_placement(p->graph, DeviceId(2));
  const RlRun r = run_rl(request, rl_options_from_params(params));
  EXPECT_EQ(r.fallback, "the expert placement on the groups");
  for (DeviceId d : r.result.placement.device_of_op) EXPECT_EQ(d, DeviceId(2));
}

// The measured reward source: a script that reads the placement file and prints a step time.
std::string script(const std::string& name) {
  return std::string("/usr/bin/python3 -S ") + DPLACE_RL_TEST_DATA_DIR + "/" + name;
}

// A command's times need not be the simulator's: measured in seconds where the simulator's step
// times are microseconds, every fitting placement must still beat every OOM one, in the
// enumeration and in the learning.
TEST(RlPlacerTest, MeasuredTimesAboveTheSimulatorsStillBeatOom) {
  const auto p = two_towers();
  const std::string command = "grep -q '\"A1\": \"/gpu:1\"' {placement} && echo oom || echo 100";
  for (const char* enumerate : {"256", "0"}) {
    SCOPED_TRACE(enumerate);
    const RlRun r = run(*p, 2,
                        {{"samples", enumerate == std::string("0") ? "48" : "256"},
                         {"batch", "8"},
                         {"enumerate", enumerate},
                         {"polish", "0"},
                         {"measure-cmd", command}});
    EXPECT_NE(r.result.note.find("best measured step time 100 s"), std::string::npos)
        << r.result.note;
    EXPECT_NE(r.result.placement[*p->graph.find_op("A1")], DeviceId(2));
    EXPECT_DOUBLE_EQ(r.best_step_time_s, 100.0);
  }
}

TEST(RlPlacerTest, MeasureCommandProvidesTheReward) {
  const auto p = two_towers();
  // fake_measure.py: 1 ms + 10 ms per op on the CPU + 1 ms per extra device used; "oom" when
  // A1 is on /gpu:1. Best: everything on /gpu:0 (1 ms). The script logs each measurement.
  const std::string log = scratch_path("measured.log");
  std::filesystem::remove(log);
  const RlRun r = run(*p, 4,
                      {{"samples", "96"},
                       {"batch", "8"},
                       {"measure-cmd", script("fake_measure.py") + " {placement} --log " + log}});
  EXPECT_NEAR(r.best_step_time_s, 1e-3, 1e-12);
  for (size_t i = 0; i < p->graph.num_ops(); ++i) {
    EXPECT_EQ(r.result.placement.device_of_op[i], DeviceId(1));
  }
  // The result's step time is the simulator's; the note says what was measured.
  EXPECT_NE(r.result.note.find("best measured step time 1 ms"), std::string::npos) << r.result.note;
  // Identical samples of a batch are measured once: as the policy converges its batches repeat
  // placements, so fewer than the 96 samples are measured, and at least one per batch of 8. The
  // greedy decoding at the end is measured too.
  std::ifstream in(log);
  int64_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  std::filesystem::remove(log);
  EXPECT_EQ(lines, r.evaluations + 1);
  EXPECT_EQ(r.result.evaluations, lines);
  EXPECT_EQ(r.samples, 96);
  EXPECT_GE(r.evaluations, 12);
  EXPECT_LT(r.evaluations, 96);
}

// A small policy: 6 groups, 3 devices, 4 features, hidden 8, embedding 5.
PolicyConfig small_policy_config(int chunk) {
  PolicyConfig c;
  c.num_groups = 6;
  c.num_devices = 3;
  c.feature_dim = 4;
  c.hidden = 8;
  c.device_embedding = 5;
  c.chunk = chunk;
  return c;
}

std::vector<float> random_features(Rng& rng) {
  std::vector<float> features(24);
  for (float& f : features) f = static_cast<float>(rng.uniform01());
  return features;
}

TEST(PolicyTest, HandWrittenGradientsMatchAutograd) {
  // 6 groups, 3 devices; group 2 may not use device 0. The batch of 4 runs as one chunk, and as
  // chunks of 2 + 2 on two threads.
  for (int chunk : {8, 2}) {
    SCOPED_TRACE(chunk);
    const PolicyConfig c = small_policy_config(chunk);
    Rng rng(3);
    const std::vector<float> features = random_features(rng);
    std::vector<uint8_t> allowed(18, 1);
    allowed[2 * 3 + 0] = 0;
    const std::unique_ptr<Policy> policy = make_policy(c, features, allowed);
    ThreadPool pool(2);
    if (chunk < 4) policy->use_parallel_for(parallel_for_on(pool));
    const int batch = 4;
    std::vector<double> uniforms(batch * 6);
    for (double& u : uniforms) u = rng.uniform01();
    std::vector<int32_t> actions;
    policy->sample(batch, uniforms, actions);
    for (int k = 0; k < batch; ++k) EXPECT_NE(actions[k * 6 + 2], 0);
    const std::vector<double> advantages = {0.7, -1.2, 0.3, 0.2};
    for (double entropy_weight : {0.0, 0.5}) {
      EXPECT_LT(policy->check_gradients(actions, advantages, entropy_weight), 1e-4);
    }
    // After a few updates (weights away from their initial values) they still agree.
    for (int i = 0; i < 5; ++i) {
      policy->sample(batch, uniforms, actions);
      policy->update(actions, advantages, 0.1);
    }
    EXPECT_LT(policy->check_gradients(actions, advantages, 0.1), 1e-4);
  }
}

TEST(PolicyTest, SamplesSharingAPrefixShareDecoderRows) {
  // Five placements of 6 groups: two identical, the rest sharing prefixes of 4, 2 and 0 devices.
  // Distinct prefixes before each step: 1, 2, 2, 3, 3, 4, so one chunk computes 15 of 30 rows.
  const std::vector<int32_t> actions = {1, 2, 1, 0, 2, 1,  //
                                        1, 2, 1, 0, 2, 1,  //
                                        1, 2, 1, 0, 0, 0,  //
                                        1, 2, 2, 1, 1, 1,  //
                                        0, 1, 1, 1, 1, 1};
  const std::vector<double> advantages = {0.9, -0.4, 0.3, -1.1, 0.6};
  Rng rng(7);
  const std::vector<float> features = random_features(rng);
  std::vector<uint8_t> allowed(18, 1);
  allowed[2 * 3 + 0] = 0;
  const std::unique_ptr<Policy> shared = make_policy(small_policy_config(8), features, allowed);
  const std::unique_ptr<Policy> unshared =
      make_policy(small_policy_config(1), features, allowed);  // one sample per chunk
  for (double entropy_weight : {0.0, 0.5}) {
    EXPECT_LT(shared->check_gradients(actions, advantages, entropy_weight), 1e-4);
  }
  const UpdateStats a = shared->update(actions, advantages, 0.2);
  const UpdateStats b = unshared->update(actions, advantages, 0.2);
  EXPECT_DOUBLE_EQ(a.decoder_rows_fraction, 0.5);
  EXPECT_DOUBLE_EQ(b.decoder_rows_fraction, 1.0);
  EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::abs(b.loss));
  EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * b.grad_norm);
  EXPECT_NEAR(a.entropy, b.entropy, 1e-6 * b.entropy);
}

// Two policies with the same weights (small_policy_config's sizes, every device allowed) and the
// uniforms of a batch of 4, all drawn from `seed`.
struct TwinPolicies {
  std::unique_ptr<Policy> a, b;
  std::vector<double> uniforms;  // 4 x 6
};
TwinPolicies twin_policies(const PolicyConfig& c, uint64_t seed) {
  Rng rng(seed);
  const std::vector<float> features = random_features(rng);
  const std::vector<uint8_t> allowed(18, 1);
  TwinPolicies t{make_policy(c, features, allowed), make_policy(c, features, allowed), {}};
  t.uniforms.resize(4 * 6);
  for (double& u : t.uniforms) u = rng.uniform01();
  return t;
}

TEST(PolicyTest, ForcedRowsRideAlongWithTheSamples) {
  // Two identical policies (chunks of one sample, so both passes below sum in the same order).
  PolicyConfig c = small_policy_config(1);
  c.learning_rate = 0.01;
  const TwinPolicies twins = twin_policies(c, 5);
  Policy* a = twins.a.get();
  Policy* b = twins.b.get();
  const std::vector<double>& uniforms = twins.uniforms;
  const std::vector<int32_t> best = {2, 0, 1, 1, 2, 0};
  std::vector<int32_t> with_best;
  std::vector<int32_t> plain;
  a->sample(4, uniforms, with_best, best);
  b->sample(4, uniforms, plain);
  ASSERT_EQ(with_best.size(), 5u * 6);
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), with_best.begin()));
  EXPECT_TRUE(std::equal(best.begin(), best.end(), with_best.begin() + 24));
  // Updating on all five rows gives the same weights whether the pass is reused (a) or recomputed
  // (b: its last pass had four rows).
  const std::vector<double> advantages = {0.5, -1.0, 0.2, -0.1, 1.5};
  a->update(with_best, advantages, 0.1);
  b->update(with_best, advantages, 0.1);
  EXPECT_EQ(a->greedy(), b->greedy());
  a->sample(4, uniforms, with_best);
  b->sample(4, uniforms, plain);
  EXPECT_EQ(with_best, plain);
  // Training on the forced row alone teaches the policy that placement.
  const std::vector<double> only_best = {0, 0, 0, 0, 1};
  for (int i = 0; i < 100; ++i) {
    a->sample(4, uniforms, with_best, best);
    a->update(with_best, only_best, 0.0);
  }
  EXPECT_EQ(a->greedy(), best);
}

// A pass that reaches its deadline is abandoned and changes nothing: after a sample(), an
// update() and a greedy() cut at once, a policy samples, learns and decodes as its twin that never
// ran them.
TEST(PolicyTest, APassedDeadlineAbandonsThePassAndKeepsTheWeights) {
  const TwinPolicies twins = twin_policies(small_policy_config(2), 11);
  Policy* a = twins.a.get();
  Policy* b = twins.b.get();
  const std::vector<double>& uniforms = twins.uniforms;
  const std::vector<double> advantages = {0.5, -1.0, 0.2, -0.1};
  std::vector<int32_t> actions_a;
  std::vector<int32_t> actions_b;
  const auto past = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  a->set_deadline(past);
  EXPECT_THROW(a->sample(4, uniforms, actions_a), PolicyDeadlinePassed);
  EXPECT_THROW((void)a->greedy(), PolicyDeadlinePassed);
  a->set_deadline(std::chrono::steady_clock::time_point::max());
  a->sample(4, uniforms, actions_a);
  b->sample(4, uniforms, actions_b);
  EXPECT_EQ(actions_a, actions_b);
  a->set_deadline(past);
  EXPECT_THROW((void)a->update(actions_a, advantages, 0.1), PolicyDeadlinePassed);
  a->set_deadline(std::chrono::steady_clock::time_point::max());
  const UpdateStats sa = a->update(actions_a, advantages, 0.1);
  const UpdateStats sb = b->update(actions_b, advantages, 0.1);
  EXPECT_EQ(sa.loss, sb.loss);
  EXPECT_EQ(sa.grad_norm, sb.grad_norm);
  a->sample(4, uniforms, actions_a);
  b->sample(4, uniforms, actions_b);
  EXPECT_EQ(actions_a, actions_b);
  EXPECT_EQ(a->greedy(), b->greedy());
}

// The backward pass cuts its products over a chunk's rows into blocks (to check the deadline
// between them); with blocks of 1,000 multiply-adds a chunk of 300 samples over 64 groups is cut
// into hundreds, and its gradients still match autograd's.
TEST(PolicyTest, GradientsOverMoreRowsThanOneBlockMatchAutograd) {
  PolicyConfig c = small_policy_config(1000);
  c.num_groups = 64;
  c.block_multiply_adds = 1000;
  Rng rng(13);
  std::vector<float> features(static_cast<size_t>(64) * c.feature_dim);
  for (float& f : features) f = static_cast<float>(rng.uniform01());
  const std::vector<uint8_t> allowed(static_cast<size_t>(64) * 3, 1);
  const std::unique_ptr<Policy> policy = make_policy(c, features, allowed);
  const int batch = 300;
  std::vector<int32_t> actions(static_cast<size_t>(batch) * 64);
  for (int32_t& a : actions) a = static_cast<int32_t>(rng.uniform_int(3));
  std::vector<double> advantages(batch);
  for (double& a : advantages) a = rng.uniform01() - 0.5;
  EXPECT_LT(policy->check_gradients(actions, advantages, 0.3), 1e-4);
  // Updated with the blocks and without them, the policy ends in the same place up to rounding.
  c.block_multiply_adds = int64_t{1} << 40;
  const std::unique_ptr<Policy> whole = make_policy(c, features, allowed);
  const UpdateStats a = policy->update(actions, advantages, 0.3);
  const UpdateStats b = whole->update(actions, advantages, 0.3);
  EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * b.grad_norm);
  EXPECT_GT(a.decoder_rows_fraction * batch * 64, 1000);
}

TEST(RewardTest, CommandOutputIsParsed) {
  const auto p = two_towers();
  ThreadPool pool(2);
  Placement on_gpu0 = single_device_placement(p->graph, DeviceId(1));
  Placement a1_on_gpu1 = on_gpu0;
  a1_on_gpu1.device_of_op[1] = DeviceId(2);
  a1_on_gpu1.device_of_op[2] = DeviceId(2);
  Placement two_on_cpu = on_gpu0;
  two_on_cpu.device_of_op[0] = DeviceId(0);
  two_on_cpu.device_of_op[5] = DeviceId(0);
  const std::vector<Placement> placements = {on_gpu0, a1_on_gpu1, two_on_cpu};
  std::vector<Outcome> outcomes(3);
  make_command_reward_source(script("fake_measure.py") + " {placement}", p->graph, p->cluster, pool)
      ->evaluate(placements, outcomes);
  EXPECT_TRUE(outcomes[0].feasible);
  EXPECT_NEAR(outcomes[0].step_time_s, 1e-3, 1e-12);
  EXPECT_FALSE(outcomes[1].feasible);
  EXPECT_TRUE(outcomes[2].feasible);
  EXPECT_NEAR(outcomes[2].step_time_s, 1e-3 + 20e-3 + 1e-3, 1e-12);
}

TEST(RewardTest, CommandFailuresAreConfigErrors) {
  const auto p = two_towers();
  ThreadPool pool(1);
  const std::vector<Placement> one = {single_device_placement(p->graph, DeviceId(1))};
  std::vector<Outcome> outcomes(1);
  for (const char* flag : {" --fail", " --garbage"}) {
    auto source = make_command_reward_source(script("fake_measure.py") + " {placement}" + flag,
                                             p->graph, p->cluster, pool);
    EXPECT_THROW(source->evaluate(one, outcomes), ConfigError) << flag;
  }
  // The command's stderr is captured, and its last line named in the error.
  auto failing = make_command_reward_source(script("fake_measure.py") + " {placement} --fail",
                                            p->graph, p->cluster, pool);
  try {
    failing->evaluate(one, outcomes);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("exited with status 3 (last line of output: ''; last "
                                         "line on stderr: 'simulated crash')"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_command_reward_source("true", p->graph, p->cluster, pool), ConfigError);
  // Decimal step times only: strtod alone took "0x10" as 16 s.
  auto hex = make_command_reward_source("echo 0x10 # {placement}", p->graph, p->cluster, pool);
  EXPECT_THROW(hex->evaluate(one, outcomes), ConfigError);
}

// What a command printed is named by its last lines, however much it printed; a shell killed by a
// signal says so; a step time printed before a reply that is not one names stderr's last line.
TEST(RewardTest, CommandErrorsNameTheLastLinesOfWhatItPrinted) {
  const auto p = two_towers();
  ThreadPool pool(1);
  const std::vector<Placement> one = {single_device_placement(p->graph, DeviceId(1))};
  std::vector<Outcome> outcomes(1);
  auto error_of = [&](const std::string& command) {
    try {
      make_command_reward_source(command, p->graph, p->cluster, pool)->evaluate(one, outcomes);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string flood = error_of("seq 1 200000; exit 1 # {placement}");
  EXPECT_LT(flood.size(), 300u) << flood.substr(0, 300);
  EXPECT_NE(flood.find("exited with status 1 (last line of output: '200000'"), std::string::npos)
      << flood.substr(0, 300);
  const std::string killed = error_of("kill -9 $$ # {placement}");
  EXPECT_NE(killed.find("was killed by signal 9 (Killed)"), std::string::npos) << killed;
  const std::string garbage = error_of("echo 'CUDA error' >&2; echo step failed # {placement}");
  EXPECT_NE(garbage.find("got 'step failed' (last line on stderr: 'CUDA error')"),
            std::string::npos)
      << garbage;
  // A NUL byte used to end the message there; control characters are shown as \xNN.
  const std::string nul = error_of("printf '0.001\\000\\n' # {placement}");
  EXPECT_NE(nul.find("got '0.001\\x00' (last line on stderr: '')"), std::string::npos) << nul;
  // Above 1e6 s the reward overflowed, which read as "the learning diverged".
  const std::string huge = error_of("echo 1e306 # {placement}");
  EXPECT_NE(huge.find("expected a step time in seconds (above 0, at most 1000000) or 'oom'"),
            std::string::npos)
      << huge;
}

// {placement} becomes one shell word whatever the temporary directory's name holds; a command
// that leaves a process running in the background is done when its shell exits.
TEST(RewardTest, PlacementPathIsOneShellWordAndABackgroundProcessIsNotWaitedFor) {
  const auto p = two_towers();
  ThreadPool pool(1);
  const std::vector<Placement> one = {single_device_placement(p->graph, DeviceId(1))};
  std::vector<Outcome> outcomes(1);
  const std::string dir = scratch_path("it's a dir");
  std::filesystem::create_directories(dir);
  {
    // TMPDIR names the directory for this block, whatever it throws.
    struct TmpdirOverride {
      explicit TmpdirOverride(const std::string& dir) {
        if (const char* old = std::getenv("TMPDIR")) saved = old;
        setenv("TMPDIR", dir.c_str(), 1);
      }
      ~TmpdirOverride() {
        if (saved) {
          setenv("TMPDIR", saved->c_str(), 1);
        } else {
          unsetenv("TMPDIR");
        }
      }
      std::optional<std::string> saved;
    } override_tmpdir(dir);
    make_command_reward_source(script("fake_measure.py") + " {placement}", p->graph, p->cluster,
                               pool)
        ->evaluate(one, outcomes);
  }
  EXPECT_TRUE(outcomes[0].feasible);
  EXPECT_NEAR(outcomes[0].step_time_s, 1e-3, 1e-12);

  // The background process is killed with the command's process group once the shell exits: it
  // never writes its file.
  const std::string late = scratch_path("late-background-write");
  std::filesystem::remove(late);
  const auto start = std::chrono::steady_clock::now();
  make_command_reward_source("(sleep 0.5; touch '" + late + "') & echo 0.01 # {placement}",
                             p->graph, p->cluster, pool, {.timeout_s = 10})
      ->evaluate(one, outcomes);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_FALSE(outcomes[0].timed_out);
  EXPECT_TRUE(outcomes[0].feasible);
  EXPECT_DOUBLE_EQ(outcomes[0].step_time_s, 0.01);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_FALSE(std::filesystem::exists(late));
}

// A measurement that hangs is killed at its time limit (or at the budget's deadline) and reported
// as timed out; the others are unaffected.
TEST(RewardTest, HungCommandIsKilledAtItsTimeLimit) {
  const auto p = two_towers();
  ThreadPool pool(2);
  const Placement on_gpu0 = single_device_placement(p->graph, DeviceId(1));
  Placement two_on_cpu = on_gpu0;
  two_on_cpu.device_of_op[0] = DeviceId(0);
  const std::vector<Placement> placements = {on_gpu0, two_on_cpu};
  const std::string command = script("fake_measure.py") + " {placement} --hang-on-cpu";
  const auto now = std::chrono::steady_clock::now();
  for (const MeasureLimits limits : {MeasureLimits{.timeout_s = 0.5},
                                     MeasureLimits{.deadline = now + std::chrono::seconds(2)}}) {
    std::vector<Outcome> outcomes(2);
    const auto start = std::chrono::steady_clock::now();
    make_command_reward_source(command, p->graph, p->cluster, pool, limits)
        ->evaluate(placements, outcomes);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0);  // the hung script sleeps 60 s
    EXPECT_TRUE(outcomes[0].feasible);
    EXPECT_FALSE(outcomes[0].timed_out);
    EXPECT_NEAR(outcomes[0].step_time_s, 1e-3, 1e-12);
    EXPECT_TRUE(outcomes[1].timed_out);
    EXPECT_FALSE(outcomes[1].feasible);
  }
}

TEST(RewardTest, PlacementFileNamesEveryOp) {
  const auto p = two_towers();
  const Json doc = Json::parse(
      placement_json_text(p->graph, p->cluster, single_device_placement(p->graph, DeviceId(2))));
  EXPECT_EQ(doc["format"], "dplace.placement/1");
  EXPECT_EQ(doc["graph"], "two_towers");
  EXPECT_EQ(doc["cluster"], "toy");
  EXPECT_EQ(doc["assignment"].size(), 7u);
  EXPECT_EQ(doc["assignment"]["B2"], "/gpu:1");
}

}  // namespace
}  // namespace dplace::rl
