#include "dplace/sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "dplace/core/rng.h"

// Counts heap allocations made through operator new, to check that a warmed-up run allocates
// nothing.
namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t bytes) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
// Out of line, so that the compiler does not pair the inlined new and delete of its callers.
[[gnu::noinline]] void release_allocation(void* p) noexcept { std::free(p); }
void operator delete(void* p) noexcept { release_allocation(p); }
void operator delete(void* p, size_t) noexcept { release_allocation(p); }

namespace dplace {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers. Times are chosen as sums of powers of two so that hand-computed values are exact and
// compared with EXPECT_EQ.

constexpr int64_t kHuge = int64_t{1} << 50;

// `n` GPUs "/gpu:0".."/gpu:n-1" with `memory_bytes` each and a default link of 1000 B/s and
// 0.25 s latency: a transfer of b bytes takes 0.25 + b / 1000 s.
Cluster make_cluster(size_t n, int64_t memory_bytes = kHuge) {
  ClusterSpec spec;
  spec.name = "test";
  for (size_t i = 0; i < n; ++i) {
    Device d;
    d.name = "/gpu:" + std::to_string(i);
    d.kind = DeviceKind::kGpu;
    d.peak_flops = 1e12;
    d.mem_bandwidth_bytes_per_s = 1e11;
    d.memory_bytes = memory_bytes;
    spec.devices.push_back(d);
  }
  spec.default_link = Link{.bandwidth_bytes_per_s = 1000, .latency_s = 0.25};
  return Cluster(std::move(spec), "test");
}

// An op whose time on every GPU is `time_s` (a measured-time override).
OpId add(GraphBuilder& b, std::string name, std::vector<TensorRef> inputs, double time_s,
         std::vector<int64_t> output_bytes = {0}, int64_t param_bytes = 0, int64_t temp_bytes = 0) {
  return b.add_op({.name = std::move(name),
                   .inputs = std::move(inputs),
                   .output_bytes = std::move(output_bytes),
                   .param_bytes = param_bytes,
                   .temp_bytes = temp_bytes,
                   .time_s = {{.device = "gpu", .time_s = time_s}}});
}

Placement on(std::vector<uint32_t> devices) {
  Placement p;
  for (uint32_t d : devices) p.device_of_op.push_back(DeviceId(d));
  return p;
}

// Graph + cluster + cost table + simulator, built in that order (the simulator keeps references).
struct SimCase {
  SimCase(Graph g, Cluster c)
      : graph(std::move(g)),
        cluster(std::move(c)),
        costs(graph, cluster),
        sim(graph, cluster, costs) {}
  Graph graph;
  Cluster cluster;
  CostTable costs;
  Simulator sim;

  SimResult run(const Placement& p) const {
    EXPECT_EQ(placement_problem(graph, cluster, costs, p), "");
    return sim.run(p, SimOptions{.record_timeline = true});
  }
  OpTiming timing(const SimResult& r, const std::string& op) const {
    return r.ops[graph.find_op(op)->value()];
  }
};

void expect_op(const SimCase& s, const SimResult& r, const std::string& op, uint32_t device,
               double start_s, double end_s) {
  const OpTiming t = s.timing(r, op);
  EXPECT_EQ(t.device, DeviceId(device)) << op;
  EXPECT_EQ(t.start_s, start_s) << op;
  EXPECT_EQ(t.end_s, end_s) << op;
}

void expect_transfer(const SimCase& s, const TransferTiming& t, const std::string& op,
                     uint32_t output, uint32_t from, uint32_t to, double start_s, double end_s) {
  EXPECT_EQ(s.graph.op(t.tensor.op).name, op);
  EXPECT_EQ(t.tensor.output, output) << op;
  EXPECT_EQ(t.from, DeviceId(from)) << op;
  EXPECT_EQ(t.to, DeviceId(to)) << op;
  EXPECT_EQ(t.start_s, start_s) << op;
  EXPECT_EQ(t.end_s, end_s) << op;
}

// Every field, compared exactly (bit-identical doubles compare equal with ==; no NaNs occur).
void expect_identical(const SimResult& a, const SimResult& b) {
  EXPECT_EQ(a.step_time_s, b.step_time_s);
  EXPECT_EQ(a.feasible, b.feasible);
  ASSERT_EQ(a.oom_devices.size(), b.oom_devices.size());
  for (size_t i = 0; i < a.oom_devices.size(); ++i) {
    EXPECT_EQ(a.oom_devices[i].device, b.oom_devices[i].device);
    EXPECT_EQ(a.oom_devices[i].peak_memory_bytes, b.oom_devices[i].peak_memory_bytes);
    EXPECT_EQ(a.oom_devices[i].capacity_bytes, b.oom_devices[i].capacity_bytes);
    EXPECT_EQ(a.oom_devices[i].overflow_bytes, b.oom_devices[i].overflow_bytes);
  }
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (size_t i = 0; i < a.devices.size(); ++i) {
    EXPECT_EQ(a.devices[i].busy_s, b.devices[i].busy_s);
    EXPECT_EQ(a.devices[i].param_bytes, b.devices[i].param_bytes);
    EXPECT_EQ(a.devices[i].peak_memory_bytes, b.devices[i].peak_memory_bytes);
  }
  EXPECT_EQ(a.num_transfers, b.num_transfers);
  EXPECT_EQ(a.transferred_bytes, b.transferred_bytes);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].device, b.ops[i].device) << "op " << i;
    EXPECT_EQ(a.ops[i].start_s, b.ops[i].start_s) << "op " << i;
    EXPECT_EQ(a.ops[i].end_s, b.ops[i].end_s) << "op " << i;
  }
  ASSERT_EQ(a.transfers.size(), b.transfers.size());
  for (size_t i = 0; i < a.transfers.size(); ++i) {
    EXPECT_EQ(a.transfers[i].tensor, b.transfers[i].tensor) << "transfer " << i;
    EXPECT_EQ(a.transfers[i].from, b.transfers[i].from) << "transfer " << i;
    EXPECT_EQ(a.transfers[i].to, b.transfers[i].to) << "transfer " << i;
    EXPECT_EQ(a.transfers[i].bytes, b.transfers[i].bytes) << "transfer " << i;
    EXPECT_EQ(a.transfers[i].start_s, b.transfers[i].start_s) << "transfer " << i;
    EXPECT_EQ(a.transfers[i].end_s, b.transfers[i].end_s) << "transfer " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Hand-computed cases.

TEST(SimulatorTest, ChainOnOneDevice) {
  GraphBuilder b("chain", "chain");
  const OpId a = add(b, "a", {}, 1.0, {100}, /*param=*/10);
  const OpId m = add(b, "b", {{a, 0}}, 2.0, {200}, /*param=*/20, /*temp=*/1000);
  add(b, "c", {{m, 0}}, 3.0, {300}, /*param=*/30);
  SimCase s(std::move(b).build(), make_cluster(2));
  const SimResult r = s.run(on({0, 0, 0}));
  // a [0,1), b [1,3), c [3,6).
  EXPECT_EQ(r.step_time_s, 6.0);
  expect_op(s, r, "a", 0, 0, 1);
  expect_op(s, r, "b", 0, 1, 3);
  expect_op(s, r, "c", 0, 3, 6);
  // Memory on /gpu:0: params 60 always.
  //   [0,1): + a.out 100                            = 160
  //   [1,3): + a.out 100 + b.out 200 + b.temp 1000  = 1360   (peak)
  //   [3,6): a.out freed when b ends; + b.out 200 + c.out 300 = 560
  //   6: c.out has no consumer, freed when c ends; b.out freed = 60
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 1360);
  EXPECT_EQ(r.devices[0].param_bytes, 60);
  EXPECT_EQ(r.devices[0].busy_s, 6.0);
  EXPECT_EQ(r.devices[1].peak_memory_bytes, 0);
  EXPECT_EQ(r.devices[1].busy_s, 0.0);
  EXPECT_EQ(r.num_transfers, 0);
  EXPECT_TRUE(r.feasible);
  EXPECT_TRUE(r.transfers.empty());
}

TEST(SimulatorTest, DiamondSplitOverTwoDevices) {
  GraphBuilder b("diamond", "diamond");
  const OpId src = add(b, "src", {}, 1.0, {1000});
  const OpId left = add(b, "left", {{src, 0}}, 2.0, {200});
  const OpId right = add(b, "right", {{src, 0}}, 3.0, {500});
  add(b, "sink", {{left, 0}, {right, 0}}, 1.0, {0});
  SimCase s(std::move(b).build(), make_cluster(2));
  const SimResult r = s.run(on({0, 0, 1, 0}));
  // src [0,1) on 0. src:0 -> 1 takes 0.25 + 1000/1000 = 1.25: [1, 2.25).
  // left [1,3) on 0. right [2.25, 5.25) on 1. right:0 -> 0 takes 0.25 + 0.5: [5.25, 6).
  // sink [6, 7) on 0.
  EXPECT_EQ(r.step_time_s, 7.0);
  expect_op(s, r, "src", 0, 0, 1);
  expect_op(s, r, "left", 0, 1, 3);
  expect_op(s, r, "right", 1, 2.25, 5.25);
  expect_op(s, r, "sink", 0, 6, 7);
  ASSERT_EQ(r.transfers.size(), 2u);
  expect_transfer(s, r.transfers[0], "src", 0, 0, 1, 1, 2.25);
  expect_transfer(s, r.transfers[1], "right", 0, 1, 0, 5.25, 6);
  EXPECT_EQ(r.transfers[0].bytes, 1000);
  EXPECT_EQ(r.num_transfers, 2);
  EXPECT_EQ(r.transferred_bytes, 1500);
  // /gpu:0: [0,1) src.out 1000; [1,3) + left.out 200 = 1200 (src.out held by left and the
  // transfer); [3,5.25) 200; [5.25,7) + received right.out 500 = 700; 7: 0.  Peak 1200.
  // /gpu:1: [1,2.25) received src.out 1000; [2.25,5.25) + right.out 500 = 1500; at 5.25 the
  // received copy goes (right ended) and right.out stays for its transfer until 6.  Peak 1500.
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 1200);
  EXPECT_EQ(r.devices[1].peak_memory_bytes, 1500);
  EXPECT_EQ(r.devices[0].busy_s, 4.0);
  EXPECT_EQ(r.devices[1].busy_s, 3.0);
}

TEST(SimulatorTest, TransfersWaitForABusyLinkButNotForTheReverseDirection) {
  GraphBuilder b("contention", "contention");
  const OpId a = add(b, "a", {}, 1.0, {1000});
  const OpId bb = add(b, "b", {}, 1.0, {1000});
  const OpId e = add(b, "e", {}, 1.0, {1000});
  add(b, "ca", {{a, 0}}, 1.0);
  add(b, "cb", {{bb, 0}}, 1.0);
  add(b, "ce", {{e, 0}}, 1.0);
  SimCase s(std::move(b).build(), make_cluster(2));
  const SimResult r = s.run(on({0, 0, 1, 1, 1, 0}));
  // /gpu:0: a [0,1), b [1,2). /gpu:1: e [0,1).
  // 0->1: a:0 [1, 2.25); b:0 requested at 2 waits for the link: [2.25, 3.5).
  // 1->0: e:0 [1, 2.25), concurrent with a:0 (its own channel).
  // /gpu:1: ca [2.25, 3.25), cb [3.5, 4.5). /gpu:0: ce [2.25, 3.25).
  EXPECT_EQ(r.step_time_s, 4.5);
  ASSERT_EQ(r.transfers.size(), 3u);
  expect_transfer(s, r.transfers[0], "a", 0, 0, 1, 1, 2.25);  // channel 0->1 before 1->0
  expect_transfer(s, r.transfers[1], "e", 0, 1, 0, 1, 2.25);
  expect_transfer(s, r.transfers[2], "b", 0, 0, 1, 2.25, 3.5);
  expect_op(s, r, "ca", 1, 2.25, 3.25);
  expect_op(s, r, "cb", 1, 3.5, 4.5);
  expect_op(s, r, "ce", 0, 2.25, 3.25);
}

TEST(SimulatorTest, MultiOutputOpSendsOutputsInIndexOrder) {
  GraphBuilder b("multi", "multi");
  const OpId m = add(b, "m", {}, 1.0, {1000, 500});
  add(b, "x", {{m, 1}}, 1.0);
  add(b, "y", {{m, 0}}, 1.0);
  add(b, "z", {{m, 0}, {m, 1}}, 1.0);
  SimCase s(std::move(b).build(), make_cluster(2));
  const SimResult r = s.run(on({0, 1, 1, 0}));
  // m [0,1) allocates both outputs (1500) on /gpu:0. Both requested at 1 on 0->1: output 0
  // first, [1, 2.25), then output 1 (0.25 + 0.5): [2.25, 3). z [1,2) on 0.
  // /gpu:1: y ready 2.25 -> [2.25, 3.25); x ready 3 -> [3.25, 4.25).
  EXPECT_EQ(r.step_time_s, 4.25);
  ASSERT_EQ(r.transfers.size(), 2u);
  expect_transfer(s, r.transfers[0], "m", 0, 0, 1, 1, 2.25);
  expect_transfer(s, r.transfers[1], "m", 1, 0, 1, 2.25, 3);
  expect_op(s, r, "z", 0, 1, 2);
  expect_op(s, r, "y", 1, 2.25, 3.25);
  expect_op(s, r, "x", 1, 3.25, 4.25);
  // /gpu:0: 1500 on [0, 2.25); m:0 freed at 2.25 (z done at 2, transfer done) -> 500 until 3.
  // /gpu:1: at 2.25 m:0 arrives (1000, held until y ends at 3.25) and m:1 starts arriving (500):
  // 1500 on [2.25, 3.25).
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 1500);
  EXPECT_EQ(r.devices[1].peak_memory_bytes, 1500);
}

TEST(SimulatorTest, OneTransferServesTwoConsumersOnTheSameDevice) {
  GraphBuilder b("shared", "shared");
  const OpId a = add(b, "a", {}, 1.0, {1000});
  add(b, "b", {{a, 0}}, 1.0);
  add(b, "c", {{a, 0}}, 1.0);
  SimCase s(std::move(b).build(), make_cluster(2));
  const SimResult r = s.run(on({0, 1, 1}));
  // a [0,1); one transfer [1, 2.25); b [2.25, 3.25); c [3.25, 4.25).
  EXPECT_EQ(r.step_time_s, 4.25);
  EXPECT_EQ(r.num_transfers, 1);
  EXPECT_EQ(r.transferred_bytes, 1000);
  expect_op(s, r, "b", 1, 2.25, 3.25);
  expect_op(s, r, "c", 1, 3.25, 4.25);
  // The received copy stays until c ends; a.out on /gpu:0 until the transfer ends.
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 1000);
  EXPECT_EQ(r.devices[1].peak_memory_bytes, 1000);
}

TEST(SimulatorTest, TensorConsumedOnTwoRemoteDevicesMovesTwice) {
  GraphBuilder b("fanout", "fanout");
  const OpId a = add(b, "a", {}, 1.0, {1000});
  add(b, "b", {{a, 0}}, 1.0);
  add(b, "c", {{a, 0}}, 2.0);
  SimCase s(std::move(b).build(), make_cluster(3));
  const SimResult r = s.run(on({0, 1, 2}));
  // Two channels, 0->1 and 0->2, both [1, 2.25). b [2.25, 3.25), c [2.25, 4.25).
  EXPECT_EQ(r.step_time_s, 4.25);
  EXPECT_EQ(r.num_transfers, 2);
  EXPECT_EQ(r.transferred_bytes, 2000);
  ASSERT_EQ(r.transfers.size(), 2u);
  expect_transfer(s, r.transfers[0], "a", 0, 0, 1, 1, 2.25);
  expect_transfer(s, r.transfers[1], "a", 0, 0, 2, 1, 2.25);
  expect_op(s, r, "c", 2, 2.25, 4.25);
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 1000);
  EXPECT_EQ(r.devices[1].peak_memory_bytes, 1000);
  EXPECT_EQ(r.devices[2].peak_memory_bytes, 1000);
}

TEST(SimulatorTest, OpConsumingTheSameTensorTwiceWaitsForOneTransfer) {
  GraphBuilder b("twice", "twice");
  const OpId a = add(b, "a", {}, 1.0, {500});
  add(b, "sq", {{a, 0}, {a, 0}}, 1.0);
  SimCase s(std::move(b).build(), make_cluster(2));
  const SimResult r = s.run(on({0, 1}));
  // a [0,1); a:0 [1, 1.75); sq [1.75, 2.75).
  EXPECT_EQ(r.step_time_s, 2.75);
  EXPECT_EQ(r.num_transfers, 1);
  expect_op(s, r, "sq", 1, 1.75, 2.75);
  EXPECT_EQ(r.devices[1].peak_memory_bytes, 500);
}

TEST(SimulatorTest, OomIsReportedWithStepTime) {
  GraphBuilder b("oom", "oom");
  const OpId a = add(b, "a", {}, 1.0, {500}, /*param=*/600);
  add(b, "b", {{a, 0}}, 1.0, {100}, /*param=*/100);
  SimCase s(std::move(b).build(), make_cluster(2, /*memory_bytes=*/1000));
  // Both on /gpu:1: params 700; [0,1) + 500 = 1200; [1,2) + 500 + 100 = 1300. Over by 300.
  const SimResult r = s.run(on({1, 1}));
  EXPECT_EQ(r.step_time_s, 2.0);
  EXPECT_FALSE(r.feasible);
  ASSERT_EQ(r.oom_devices.size(), 1u);
  EXPECT_EQ(r.oom_devices[0].device, DeviceId(1));
  EXPECT_EQ(r.oom_devices[0].peak_memory_bytes, 1300);
  EXPECT_EQ(r.oom_devices[0].capacity_bytes, 1000);
  EXPECT_EQ(r.oom_devices[0].overflow_bytes, 300);
  // Split: /gpu:0 params 600 + a.out 500 held until the transfer ends = 1100 > 1000 (over by
  // 100); /gpu:1 params 100 + received 500 + b.out 100 = 700, fits.
  const SimResult split = s.run(on({0, 1}));
  EXPECT_FALSE(split.feasible);
  ASSERT_EQ(split.oom_devices.size(), 1u);
  EXPECT_EQ(split.oom_devices[0].device, DeviceId(0));
  EXPECT_EQ(split.oom_devices[0].overflow_bytes, 100);
  EXPECT_EQ(split.devices[1].peak_memory_bytes, 700);
  // Exactly at capacity is feasible.
  GraphBuilder b2("fit", "fit");
  add(b2, "a", {}, 1.0, {400}, /*param=*/600);
  SimCase s2(std::move(b2).build(), make_cluster(1, /*memory_bytes=*/1000));
  EXPECT_TRUE(s2.run(on({0})).feasible);
}

TEST(SimulatorTest, RooflineTimesFromTheCostModel) {
  GraphBuilder b("roofline", "roofline");
  // Compute-bound: 2e9 flops at 1e12 * 0.5 = 4e-3 s (memory 8e6 / 1e11 = 8e-5 s).
  const OpId mm = b.add_op({.name = "mm", .type = "MatMul", .flops = 2e9, .bytes_accessed = 8e6});
  // Memory-bound: 1e9 bytes at 1e11 = 1e-2 s (compute 1e6 / 5e11 = 2e-6 s).
  b.add_op(
      {.name = "add", .type = "Add", .inputs = {{mm, 0}}, .flops = 1e6, .bytes_accessed = 1e9});
  ClusterSpec spec;
  spec.name = "one";
  Device d;
  d.name = "/gpu:0";
  d.kind = DeviceKind::kGpu;
  d.peak_flops = 1e12;
  d.mem_bandwidth_bytes_per_s = 1e11;
  d.memory_bytes = kHuge;
  d.op_overhead_s = 1e-5;
  d.efficiency = {{"default", 0.5}};
  spec.devices.push_back(d);
  SimCase s(std::move(b).build(), Cluster(std::move(spec), "one"));
  const SimResult r = s.run(on({0, 0}));
  // (1e-5 + 4e-3) + (1e-5 + 1e-2) = 1.402e-2.
  EXPECT_DOUBLE_EQ(r.step_time_s, 1.402e-2);
  EXPECT_DOUBLE_EQ(r.ops[0].end_s, 4.01e-3);
}

// Ready queue order: earliest-ready first, ties by topological rank (not file index).
TEST(SimulatorTest, ReadyOpsStartEarliestReadyFirstThenLowestRank) {
  GraphBuilder b("ties", "ties");
  const OpId a = add(b, "a", {}, 1.0);
  add(b, "bb", {}, 1.0);
  add(b, "c", {{a, 0}}, 1.0);
  add(b, "d", {}, 1.0);
  const Graph g = std::move(b).build();
  // Kahn: ready {a, bb, d}; a (rank 0) releases c, which has a lower index than d: ranks
  // a 0, bb 1, c 2, d 3.
  ASSERT_EQ(g.topo_rank(*g.find_op("c")), 2u);
  ASSERT_EQ(g.topo_rank(*g.find_op("d")), 3u);
  SimCase s(g, make_cluster(1));
  const SimResult r = s.run(on({0, 0, 0, 0}));
  // t=0 ready: a, bb, d -> a. t=1: c becomes ready; bb and d were ready earlier, so bb [1,2),
  // d [2,3), then c [3,4) although c has the lower rank than d.
  expect_op(s, r, "a", 0, 0, 1);
  expect_op(s, r, "bb", 0, 1, 2);
  expect_op(s, r, "d", 0, 2, 3);
  expect_op(s, r, "c", 0, 3, 4);
}

TEST(SimulatorTest, OpsReadyAtTheSameInstantStartByRankNotFileIndex) {
  GraphBuilder b("rank", "rank");
  // File order p, r, q1, q2; p needs q2, r needs q1. Kahn: q1 (rank 0), r (1), q2 (2), p (3).
  const OpId q1 = OpId(2);
  const OpId q2 = OpId(3);
  add(b, "p", {{q2, 0}}, 1.0);
  add(b, "r", {{q1, 0}}, 1.0);
  add(b, "q1", {}, 1.0, {0});
  add(b, "q2", {}, 1.0, {0});
  SimCase s(std::move(b).build(), make_cluster(3));
  // q1 on 1, q2 on 2, both [0,1); their 0-byte outputs reach /gpu:0 at 1.25 on two channels.
  // p and r become ready at the same instant; r has the lower rank: r [1.25, 2.25), p [2.25, 3.25).
  const SimResult r = s.run(on({0, 0, 1, 2}));
  expect_op(s, r, "r", 0, 1.25, 2.25);
  expect_op(s, r, "p", 0, 2.25, 3.25);
}

// Two transfers requested on one busy channel at the same instant, the second by a zero-length op
// that finished later in that instant but has the lower rank: it goes first.
TEST(SimulatorTest, SameInstantTransferRequestsQueueByProducerRank) {
  GraphBuilder b("queue", "queue");
  // File order: g, y, blk, x, cb, cx, cy. Kahn ranks: g 0, y 1, blk 2, x 3, ...
  const OpId g = add(b, "g", {}, 1.0, {0});
  const OpId y = add(b, "y", {{g, 0}}, 0.0, {250});
  const OpId blk = add(b, "blk", {}, 1.0, {1000});
  const OpId x = add(b, "x", {}, 1.0, {250});
  add(b, "cb", {{blk, 0}}, 1.0);
  add(b, "cx", {{x, 0}}, 1.0);
  add(b, "cy", {{y, 0}}, 1.0);
  SimCase s(std::move(b).build(), make_cluster(2));
  ASSERT_LT(s.graph.topo_rank(y), s.graph.topo_rank(x));
  const SimResult r = s.run(on({1, 0, 0, 0, 1, 1, 1}));
  // /gpu:1: g [0,1); g:0 (0 bytes) -> /gpu:0 [1, 1.25).
  // /gpu:0: blk [0,1) (rank 2 before x rank 3); blk:0 -> 1 [1, 2.25). x [1,2). y ready at 1.25.
  // t=2: x ends and requests x:0 (link busy); y starts, takes 0 s, ends and requests y:0 in the
  // same instant. At 2.25 the channel takes y:0 first (rank 1 < 3): [2.25, 2.75), x:0 [2.75, 3.25).
  expect_op(s, r, "x", 0, 1, 2);
  expect_op(s, r, "y", 0, 2, 2);
  ASSERT_EQ(r.transfers.size(), 4u);
  expect_transfer(s, r.transfers[0], "blk", 0, 0, 1, 1, 2.25);
  expect_transfer(s, r.transfers[1], "g", 0, 1, 0, 1, 1.25);
  expect_transfer(s, r.transfers[2], "y", 0, 0, 1, 2.25, 2.75);
  expect_transfer(s, r.transfers[3], "x", 0, 0, 1, 2.75, 3.25);
  // /gpu:1 after g: cb ready 2.25 [2.25, 3.25); cy ready 2.75, cx ready 3.25: cy [3.25, 4.25),
  // cx [4.25, 5.25).
  expect_op(s, r, "cb", 1, 2.25, 3.25);
  expect_op(s, r, "cy", 1, 3.25, 4.25);
  expect_op(s, r, "cx", 1, 4.25, 5.25);
  EXPECT_EQ(r.step_time_s, 5.25);
}

TEST(SimulatorTest, ZeroDurationOpsCompleteInTheSameInstant) {
  GraphBuilder b("zero", "zero");
  const OpId a = add(b, "a", {}, 0.0, {100});
  const OpId z = add(b, "z", {{a, 0}}, 0.0, {100}, 0, /*temp=*/5000);
  const OpId c = add(b, "c", {{z, 0}}, 1.0, {0});
  add(b, "w", {{c, 0}}, 0.0, {7000});
  SimCase s(std::move(b).build(), make_cluster(1));
  const SimResult r = s.run(on({0, 0, 0, 0}));
  // a, z start and end at 0; c [0,1); w [1,1].
  expect_op(s, r, "a", 0, 0, 0);
  expect_op(s, r, "z", 0, 0, 0);
  expect_op(s, r, "c", 0, 0, 1);
  expect_op(s, r, "w", 0, 1, 1);
  EXPECT_EQ(r.step_time_s, 1.0);
  // Held over [alloc, free): a.out and z.temp are held for zero time; over [0,1) only z.out (100)
  // is held; w.out (no consumer) exists for zero time at 1.
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 100);
}

TEST(SimulatorTest, ZeroLengthTransferCompletesInTheSameInstant) {
  GraphBuilder b("zt", "zt");
  const OpId a = add(b, "a", {}, 1.0, {0});
  add(b, "b", {{a, 0}}, 1.0);
  ClusterSpec spec = make_cluster(2).spec();
  spec.links.push_back({.from = "/gpu:0",
                        .to = "/gpu:1",
                        .link = {.bandwidth_bytes_per_s = 1000, .latency_s = 0},
                        .directed = true});
  SimCase s(std::move(b).build(), Cluster(spec, "zt"));
  const SimResult r = s.run(on({0, 1}));
  ASSERT_EQ(r.transfers.size(), 1u);
  expect_transfer(s, r.transfers[0], "a", 0, 0, 1, 1, 1);
  expect_op(s, r, "b", 1, 1, 2);
  EXPECT_EQ(r.step_time_s, 2.0);
}

TEST(SimulatorTest, EmptyGraphTakesNoTime) {
  GraphBuilder b("empty", "empty");
  SimCase s(std::move(b).build(), make_cluster(2));
  const SimResult r = s.run(Placement{});
  EXPECT_EQ(r.step_time_s, 0.0);
  EXPECT_TRUE(r.feasible);
  EXPECT_EQ(s.sim.lower_bound_s(), 0.0);
}

class RecordingObserver : public SimObserver {
 public:
  void on_op(OpId op, const OpTiming& timing) override {
    ops.push_back(op);
    op_timings.push_back(timing);
  }
  void on_transfer(const TransferTiming& timing) override { transfers.push_back(timing); }
  std::vector<OpId> ops;
  std::vector<OpTiming> op_timings;
  std::vector<TransferTiming> transfers;
};

TEST(SimulatorTest, ObserverSeesEveryOpAndTransferInStartOrder) {
  GraphBuilder b("diamond", "diamond");
  const OpId src = add(b, "src", {}, 1.0, {1000});
  const OpId left = add(b, "left", {{src, 0}}, 2.0, {200});
  const OpId right = add(b, "right", {{src, 0}}, 3.0, {500});
  add(b, "sink", {{left, 0}, {right, 0}}, 1.0, {0});
  SimCase s(std::move(b).build(), make_cluster(2));
  RecordingObserver obs;
  SimWorkspace ws;
  SimResult r;
  s.sim.run(on({0, 0, 1, 0}), ws, r, SimOptions{.record_timeline = true, .observer = &obs});
  // Start order: src 0, left 1, right 2.25, sink 6.
  EXPECT_EQ(obs.ops, (std::vector<OpId>{src, left, right, OpId(3)}));
  for (size_t i = 0; i < obs.ops.size(); ++i) {
    EXPECT_EQ(obs.op_timings[i].start_s, r.ops[obs.ops[i].value()].start_s);
    EXPECT_EQ(obs.op_timings[i].end_s, r.ops[obs.ops[i].value()].end_s);
  }
  ASSERT_EQ(obs.transfers.size(), 2u);
  EXPECT_EQ(obs.transfers[0].tensor, (TensorRef{src, 0}));
  EXPECT_EQ(obs.transfers[1].tensor, (TensorRef{right, 0}));
  EXPECT_EQ(obs.transfers[1].start_s, 5.25);
  EXPECT_EQ(obs.transfers[1].end_s, 6.0);
  // The observer works without a timeline, too.
  RecordingObserver obs2;
  s.sim.run(on({0, 0, 1, 0}), ws, r, SimOptions{.observer = &obs2});
  EXPECT_EQ(obs2.ops, obs.ops);
  EXPECT_EQ(obs2.transfers.size(), 2u);
  EXPECT_TRUE(r.ops.empty());
  EXPECT_TRUE(r.transfers.empty());
}

TEST(SimulatorTest, LowerBoundIsCriticalPathOrAverageWork) {
  {
    // Diamond 1, 2, 3, 1: critical path 1 + 3 + 1 = 5; work 7 / 2 = 3.5.
    GraphBuilder b("diamond", "diamond");
    const OpId src = add(b, "src", {}, 1.0);
    const OpId left = add(b, "left", {{src, 0}}, 2.0);
    const OpId right = add(b, "right", {{src, 0}}, 3.0);
    add(b, "sink", {{left, 0}, {right, 0}}, 1.0);
    SimCase s(std::move(b).build(), make_cluster(2));
    EXPECT_EQ(s.sim.lower_bound_s(), 5.0);
    EXPECT_LE(s.sim.lower_bound_s(), s.run(on({0, 0, 1, 0})).step_time_s);
  }
  {
    // Four independent ops, 1 s on gpu and 4 s on cpu; one op allows only cpu.
    // Fastest: 1, 1, 1, 4 -> critical path 4; work 7 / 2 devices = 3.5 -> 4.
    // Without the cpu-only op: work 3 / 2 = 1.5 > critical path 1.
    GraphBuilder b("wide", "wide");
    for (int i = 0; i < 4; ++i) {
      Op op{.name = "op" + std::to_string(i),
            .time_s = {{.device = "gpu", .time_s = 1.0}, {.device = "cpu", .time_s = 4.0}}};
      if (i == 3) op.devices = {"cpu"};
      b.add_op(std::move(op));
    }
    ClusterSpec spec = make_cluster(2).spec();
    spec.devices[1].kind = DeviceKind::kCpu;
    spec.devices[1].name = "/cpu:0";
    const Graph g = std::move(b).build();
    SimCase s(g, Cluster(spec, "mixed"));
    EXPECT_EQ(s.sim.lower_bound_s(), 4.0);

    GraphBuilder b3("wide3", "wide3");
    for (int i = 0; i < 3; ++i) add(b3, "op" + std::to_string(i), {}, 1.0);
    SimCase s3(std::move(b3).build(), make_cluster(2));
    EXPECT_EQ(s3.sim.lower_bound_s(), 1.5);
  }
}

// ---------------------------------------------------------------------------------------------
// Randomised cross-checks against a slow, direct implementation of the rules.

struct RandomCase {
  Graph graph;
  std::vector<Placement> placements;
};

// A DAG of `n` ops in shuffled file order with multi-output ops, repeated inputs, zero-length
// ops, zero-byte tensors, temp and param bytes.
Graph random_graph(Rng& rng, size_t n) {
  std::vector<uint32_t> file_pos(n);
  for (size_t i = 0; i < n; ++i) file_pos[i] = static_cast<uint32_t>(i);
  for (size_t i = n; i > 1; --i) std::swap(file_pos[i - 1], file_pos[rng.uniform_int(i)]);
  const double times[] = {0.0, 0.0, 0.25, 0.5, 1.0, 1.5};
  const int64_t sizes[] = {0, 100, 250, 1000};
  std::vector<Op> ops(n);
  std::vector<size_t> num_outputs(n);
  for (size_t i = 0; i < n; ++i) {  // i is the logical (topological) index
    Op& op = ops[file_pos[i]];
    op.name = "op" + std::to_string(i);
    num_outputs[i] = 1 + rng.uniform_int(3);
    op.output_bytes.clear();
    for (size_t k = 0; k < num_outputs[i]; ++k)
      op.output_bytes.push_back(sizes[rng.uniform_int(4)]);
    if (i > 0) {
      const size_t num_inputs = rng.uniform_int(4);
      for (size_t k = 0; k < num_inputs; ++k) {
        // Mostly recent producers, so chains are long.
        const size_t back = 1 + rng.uniform_int(std::min<size_t>(i, 6));
        const size_t j = rng.uniform_int(4) == 0 ? rng.uniform_int(i) : i - back;
        op.inputs.push_back(
            {OpId(file_pos[j]), static_cast<uint32_t>(rng.uniform_int(num_outputs[j]))});
        if (rng.uniform_int(8) == 0) op.inputs.push_back(op.inputs.back());  // repeated tensor
      }
    }
    op.param_bytes = rng.uniform_int(2) * 100;
    op.temp_bytes = rng.uniform_int(3) == 0 ? 500 : 0;
    op.time_s = {{.device = "gpu", .time_s = times[rng.uniform_int(6)]}};
  }
  GraphBuilder b("random", "random");
  for (Op& op : ops) b.add_op(std::move(op));
  return std::move(b).build();
}

// `n` GPUs; the default link (0.25 s + b/1000) plus a fast 0 <-> 1 link with no latency, on which
// 0-byte tensors move in zero time.
Cluster random_cluster(size_t n = 3) {
  ClusterSpec spec = make_cluster(n).spec();
  spec.links.push_back(
      {.from = "/gpu:0", .to = "/gpu:1", .link = {.bandwidth_bytes_per_s = 2000, .latency_s = 0}});
  return Cluster(spec, "random");
}

Placement random_placement(Rng& rng, size_t n, size_t num_devices) {
  Placement p;
  for (size_t i = 0; i < n; ++i)
    p.device_of_op.push_back(DeviceId::from_index(rng.uniform_int(num_devices)));
  return p;
}

// The rules of docs/simulator.md written directly, with linear scans and no clever state.
SimResult reference_run(const Graph& g, const Cluster& c, const CostTable& costs,
                        const Placement& p) {
  const size_t n = g.num_ops();
  const size_t nd = c.num_devices();
  struct Request {
    TensorRef tensor;
    uint32_t to = 0;
    size_t instant = 0;
    double start_s = -1;
    double end_s = -1;
    bool done = false;
  };
  std::vector<Request> requests;
  std::vector<double> start(n, -1), end(n, -1);
  std::vector<bool> done(n, false);
  std::vector<long> ready_instant(n, -1);
  std::vector<long> running_op(nd, -1);
  std::vector<long> running_transfer(nd * nd, -1);
  SimResult r;
  r.devices.resize(nd);
  r.ops.resize(n);
  auto dev = [&](OpId op) { return p[op].value(); };
  auto present = [&](TensorRef t, uint32_t d) {
    if (dev(t.op) == d) return static_cast<bool>(done[t.op.value()]);
    for (const Request& q : requests) {
      if (q.tensor == t && q.to == d && q.done) return true;
    }
    return false;
  };
  double now = 0;
  size_t instant = 0;
  for (;;) {
    bool again = true;
    while (again) {
      for (uint32_t d = 0; d < nd; ++d) {
        const long o = running_op[d];
        if (o < 0 || end[o] > now) continue;
        done[o] = true;
        running_op[d] = -1;
        const OpId id = OpId(static_cast<uint32_t>(o));
        for (uint32_t k = 0; k < g.num_outputs(id); ++k) {
          for (uint32_t to = 0; to < nd; ++to) {
            if (to == d) continue;
            bool needed = false;
            for (OpId cons : g.consumers({id, k})) needed = needed || dev(cons) == to;
            if (needed) requests.push_back({.tensor = {id, k}, .to = to, .instant = instant});
          }
        }
      }
      for (size_t ch = 0; ch < nd * nd; ++ch) {
        const long q = running_transfer[ch];
        if (q < 0 || requests[q].end_s > now) continue;
        requests[q].done = true;
        running_transfer[ch] = -1;
      }
      for (size_t o = 0; o < n; ++o) {
        if (ready_instant[o] >= 0) continue;
        bool ready = true;
        for (const TensorRef& in : g.op(OpId::from_index(o)).inputs) {
          ready = ready && present(in, dev(OpId::from_index(o)));
        }
        if (ready) ready_instant[o] = static_cast<long>(instant);
      }
      for (uint32_t from = 0; from < nd; ++from) {
        for (uint32_t to = 0; to < nd; ++to) {
          const size_t ch = from * nd + to;
          if (from == to || running_transfer[ch] >= 0) continue;
          long best = -1;
          auto key = [&](long q) {
            const Request& rq = requests[q];
            return std::tuple(rq.instant, g.topo_rank(rq.tensor.op), rq.tensor.output);
          };
          for (size_t q = 0; q < requests.size(); ++q) {
            const Request& rq = requests[q];
            if (rq.start_s >= 0 || dev(rq.tensor.op) != from || rq.to != to) continue;
            if (best < 0 || key(static_cast<long>(q)) < key(best)) best = static_cast<long>(q);
          }
          if (best < 0) continue;
          Request& rq = requests[best];
          const int64_t bytes = g.tensor_bytes(rq.tensor);
          rq.start_s = now;
          rq.end_s = now + transfer_time_s(bytes, *c.link(DeviceId(from), DeviceId(to)));
          running_transfer[ch] = best;
          r.transfers.push_back({.tensor = rq.tensor,
                                 .from = DeviceId(from),
                                 .to = DeviceId(to),
                                 .bytes = bytes,
                                 .start_s = rq.start_s,
                                 .end_s = rq.end_s});
          ++r.num_transfers;
          r.transferred_bytes += bytes;
        }
      }
      for (uint32_t d = 0; d < nd; ++d) {
        if (running_op[d] >= 0) continue;
        long best = -1;
        for (size_t o = 0; o < n; ++o) {
          if (start[o] >= 0 || ready_instant[o] < 0 || dev(OpId::from_index(o)) != d) continue;
          const OpId id = OpId::from_index(o);
          if (best < 0 ||
              std::pair(ready_instant[o], g.topo_rank(id)) <
                  std::pair(ready_instant[best], g.topo_rank(OpId(static_cast<uint32_t>(best))))) {
            best = static_cast<long>(o);
          }
        }
        if (best < 0) continue;
        const double t = costs.time_s(OpId(static_cast<uint32_t>(best)), DeviceId(d));
        start[best] = now;
        end[best] = now + t;
        running_op[d] = best;
        r.ops[best] = {.device = DeviceId(d), .start_s = now, .end_s = now + t};
        r.devices[d].busy_s += t;
      }
      again = false;
      for (uint32_t d = 0; d < nd; ++d)
        again = again || (running_op[d] >= 0 && end[running_op[d]] <= now);
      for (long q : running_transfer) again = again || (q >= 0 && requests[q].end_s <= now);
    }
    double next = kInfiniteTime;
    for (uint32_t d = 0; d < nd; ++d) {
      if (running_op[d] >= 0) next = std::min(next, end[running_op[d]]);
    }
    for (long q : running_transfer) {
      if (q >= 0) next = std::min(next, requests[q].end_s);
    }
    if (next == kInfiniteTime) break;
    now = next;
    ++instant;
  }
  r.step_time_s = now;
  return r;
}

// Peak memory per device computed from a recorded timeline and the definitions of semantics 5:
// intervals [alloc, free), level sampled at every allocation time.
std::vector<int64_t> peaks_from_timeline(const Graph& g, const Placement& p, size_t nd,
                                         const SimResult& r) {
  struct Interval {
    double from_s, to_s;
    int64_t bytes;
  };
  std::vector<std::vector<Interval>> per_device(nd);
  std::vector<int64_t> params(nd, 0);
  for (size_t i = 0; i < g.num_ops(); ++i) {
    const OpId id = OpId::from_index(i);
    const uint32_t d = p[id].value();
    const OpTiming& t = r.ops[i];
    params[d] += g.op(id).param_bytes;
    per_device[d].push_back({t.start_s, t.end_s, g.op(id).temp_bytes});
    for (uint32_t k = 0; k < g.num_outputs(id); ++k) {
      const TensorRef tensor{id, k};
      double free_s = t.end_s;
      for (OpId cons : g.consumers(tensor)) {
        if (p[cons].value() == d) free_s = std::max(free_s, r.ops[cons.value()].end_s);
      }
      for (const TransferTiming& tr : r.transfers) {
        if (tr.tensor == tensor) free_s = std::max(free_s, tr.end_s);
      }
      per_device[d].push_back({t.start_s, free_s, g.tensor_bytes(tensor)});
    }
  }
  for (const TransferTiming& tr : r.transfers) {
    double free_s = tr.end_s;
    for (OpId cons : g.consumers(tr.tensor)) {
      if (p[cons] == tr.to) free_s = std::max(free_s, r.ops[cons.value()].end_s);
    }
    per_device[tr.to.value()].push_back({tr.start_s, free_s, tr.bytes});
  }
  std::vector<int64_t> peaks(nd);
  for (size_t d = 0; d < nd; ++d) {
    int64_t peak = params[d];
    for (const Interval& at : per_device[d]) {
      int64_t level = params[d];
      for (const Interval& iv : per_device[d]) {
        if (iv.from_s <= at.from_s && at.from_s < iv.to_s) level += iv.bytes;
      }
      peak = std::max(peak, level);
    }
    peaks[d] = peak;
  }
  return peaks;
}

TEST(SimulatorTest, MatchesDirectImplementationOfTheRulesOnRandomGraphs) {
  Rng rng(12345);
  // 3 devices, and 20 (more than the simulator samples exhaustively at each instant).
  const Cluster small = random_cluster(3);
  const Cluster large = random_cluster(20);
  for (int round = 0; round < 40; ++round) {
    const Cluster& cluster = round % 4 == 3 ? large : small;
    const Graph g = random_graph(rng, 10 + rng.uniform_int(50));
    const CostTable costs(g, cluster);
    const Simulator sim(g, cluster, costs);
    SimWorkspace ws;
    SimResult r;
    for (int k = 0; k < 5; ++k) {
      const Placement p = random_placement(rng, g.num_ops(), cluster.num_devices());
      sim.run(p, ws, r, SimOptions{.record_timeline = true});
      const SimResult ref = reference_run(g, cluster, costs, p);
      SCOPED_TRACE("round " + std::to_string(round) + " placement " + std::to_string(k));
      EXPECT_EQ(r.step_time_s, ref.step_time_s);
      EXPECT_EQ(r.num_transfers, ref.num_transfers);
      EXPECT_EQ(r.transferred_bytes, ref.transferred_bytes);
      ASSERT_EQ(r.ops.size(), ref.ops.size());
      for (size_t i = 0; i < r.ops.size(); ++i) {
        EXPECT_EQ(r.ops[i].device, ref.ops[i].device) << g.op(OpId::from_index(i)).name;
        EXPECT_EQ(r.ops[i].start_s, ref.ops[i].start_s) << g.op(OpId::from_index(i)).name;
        EXPECT_EQ(r.ops[i].end_s, ref.ops[i].end_s) << g.op(OpId::from_index(i)).name;
      }
      ASSERT_EQ(r.transfers.size(), ref.transfers.size());
      for (size_t i = 0; i < r.transfers.size(); ++i) {
        EXPECT_EQ(r.transfers[i].tensor, ref.transfers[i].tensor) << i;
        EXPECT_EQ(r.transfers[i].to, ref.transfers[i].to) << i;
        EXPECT_EQ(r.transfers[i].start_s, ref.transfers[i].start_s) << i;
        EXPECT_EQ(r.transfers[i].end_s, ref.transfers[i].end_s) << i;
      }
      const std::vector<int64_t> peaks = peaks_from_timeline(g, p, cluster.num_devices(), r);
      for (size_t d = 0; d < cluster.num_devices(); ++d) {
        EXPECT_EQ(r.devices[d].peak_memory_bytes, peaks[d]) << "device " << d;
        EXPECT_EQ(r.devices[d].busy_s, ref.devices[d].busy_s) << "device " << d;
      }
      EXPECT_LE(sim.lower_bound_s(), r.step_time_s);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(SimulatorTest, DeterministicAcrossRunsAndWorkspaces) {
  Rng rng(7);
  const Cluster cluster = random_cluster();
  const Graph g = random_graph(rng, 300);
  const CostTable costs(g, cluster);
  const Simulator sim(g, cluster, costs);
  const Placement p = random_placement(rng, g.num_ops(), cluster.num_devices());
  SimWorkspace ws1;
  SimWorkspace ws2;
  SimResult a;
  SimResult b;
  SimResult c;
  const SimOptions timeline{.record_timeline = true};
  sim.run(p, ws1, a, timeline);
  sim.run(p, ws1, b, timeline);
  sim.run(p, ws2, c, timeline);
  expect_identical(a, b);
  expect_identical(a, c);
  expect_identical(a, sim.run(p, timeline));
  // A second simulator over the same inputs agrees as well.
  const Simulator sim2(g, cluster, costs);
  expect_identical(a, sim2.run(p, timeline));
}

TEST(SimulatorTest, ReusedWorkspaceGivesTheSameResultsAsFreshOnes) {
  Rng rng(99);
  const Cluster cluster = random_cluster();
  const Graph g = random_graph(rng, 200);
  const CostTable costs(g, cluster);
  const Simulator sim(g, cluster, costs);
  SimWorkspace ws;
  SimResult reused;
  for (int k = 0; k < 20; ++k) {
    const Placement p = k == 0 ? single_device_placement(g, DeviceId(2))
                               : random_placement(rng, g.num_ops(), cluster.num_devices());
    sim.run(p, ws, reused, SimOptions{.record_timeline = (k % 2 == 0)});
    SimResult fresh = sim.run(p, SimOptions{.record_timeline = (k % 2 == 0)});
    expect_identical(reused, fresh);
  }
  // The same workspace then serves a different graph.
  const Graph g2 = random_graph(rng, 50);
  const CostTable costs2(g2, cluster);
  const Simulator sim2(g2, cluster, costs2);
  const Placement p2 = random_placement(rng, g2.num_ops(), cluster.num_devices());
  sim2.run(p2, ws, reused);
  expect_identical(reused, sim2.run(p2));
}

TEST(SimulatorTest, ConcurrentRunsWithOwnWorkspacesAgreeWithSerialRuns) {
  Rng rng(11);
  const Cluster cluster = random_cluster();
  const Graph g = random_graph(rng, 300);
  const CostTable costs(g, cluster);
  const Simulator sim(g, cluster, costs);
  std::vector<Placement> placements;
  for (int k = 0; k < 16; ++k) {
    placements.push_back(random_placement(rng, g.num_ops(), cluster.num_devices()));
  }
  std::vector<SimResult> serial(placements.size());
  for (size_t k = 0; k < placements.size(); ++k) serial[k] = sim.run(placements[k]);
  std::vector<SimResult> parallel(placements.size());
  std::vector<std::thread> threads;
  for (size_t w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      SimWorkspace ws;
      for (size_t k = w; k < placements.size(); k += 2) sim.run(placements[k], ws, parallel[k]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t k = 0; k < placements.size(); ++k) expect_identical(serial[k], parallel[k]);
}

TEST(SimulatorTest, WarmedUpRunsAllocateNothing) {
  Rng rng(5);
  const Cluster cluster = random_cluster(4);
  const Graph g = random_graph(rng, 400);
  const CostTable costs(g, cluster);
  const Simulator sim(g, cluster, costs);
  std::vector<Placement> placements;
  placements.push_back(single_device_placement(g, DeviceId(0)));
  for (int k = 0; k < 10; ++k) {
    placements.push_back(random_placement(rng, g.num_ops(), cluster.num_devices()));
  }
  SimWorkspace ws;
  SimResult r;
  sim.run(placements[0], ws, r);  // warm-up: sizes the workspace and the result
  const int64_t before = g_allocations.load();
  for (const Placement& p : placements) sim.run(p, ws, r);
  EXPECT_EQ(g_allocations.load() - before, 0);
}

TEST(SimulatorTest, TimelineOffGivesTheSameSummary) {
  Rng rng(3);
  const Cluster cluster = random_cluster();
  const Graph g = random_graph(rng, 200);
  const CostTable costs(g, cluster);
  const Simulator sim(g, cluster, costs);
  const Placement p = random_placement(rng, g.num_ops(), cluster.num_devices());
  SimResult with = sim.run(p, SimOptions{.record_timeline = true});
  const SimResult without = sim.run(p);
  EXPECT_TRUE(without.ops.empty());
  EXPECT_TRUE(without.transfers.empty());
  EXPECT_FALSE(with.ops.empty());
  with.ops.clear();
  with.transfers.clear();
  expect_identical(with, without);
}

}  // namespace
}  // namespace dplace
