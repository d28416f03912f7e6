#include "dplace/ir/graph.h"

#include <gtest/gtest.h>

#include "dplace/core/error.h"

namespace dplace {
namespace {

std::string build_error(GraphBuilder b) {
  try {
    std::move(b).build();
  } catch (const GraphError& e) {
    return e.what();
  }
  return "";
}

OpId add(GraphBuilder& b, const std::string& name, std::vector<TensorRef> inputs = {},
         std::vector<int64_t> outputs = {8}) {
  return b.add_op({.name = name, .inputs = std::move(inputs), .output_bytes = std::move(outputs)});
}

TEST(GraphTest, DiamondAdjacencyBothWays) {
  GraphBuilder b("diamond", "test");
  const OpId a = add(b, "a");
  const OpId l = add(b, "l", {{a, 0}});
  const OpId r = add(b, "r", {{a, 0}});
  const OpId j = add(b, "j", {{l, 0}, {r, 0}});
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.num_ops(), 4u);
  EXPECT_EQ(g.num_edges(), 4u);
  ASSERT_EQ(g.successors(a).size(), 2u);
  EXPECT_EQ(g.successors(a)[0], l);
  EXPECT_EQ(g.successors(a)[1], r);
  ASSERT_EQ(g.predecessors(j).size(), 2u);
  EXPECT_EQ(g.consumers({a, 0}).size(), 2u);
  EXPECT_EQ(g.find_op("r"), r);
  EXPECT_FALSE(g.find_op("zz").has_value());
  EXPECT_DOUBLE_EQ(g.bytes_accessed(j), 24);  // two 8-byte inputs + one 8-byte output
}

TEST(GraphTest, TopologicalOrderBreaksTiesByFileIndex) {
  // File order: c, b, a with a -> c; b independent. Ready initially: b(1), a(2). Kahn picks the
  // lowest index among ready ops: b, then a, then c.
  GraphBuilder b("t", "test");
  const OpId c = b.add_op({.name = "c", .inputs = {{OpId(2), 0}}});
  const OpId bb = add(b, "b");
  const OpId a = add(b, "a");
  const Graph g = std::move(b).build();
  ASSERT_EQ(g.topo_order().size(), 3u);
  EXPECT_EQ(g.topo_order()[0], bb);
  EXPECT_EQ(g.topo_order()[1], a);
  EXPECT_EQ(g.topo_order()[2], c);
  EXPECT_EQ(g.topo_rank(c), 2u);
}

TEST(GraphTest, MultiOutputConsumersArePerTensor) {
  GraphBuilder b("m", "test");
  const OpId s = add(b, "split", {}, {100, 200});
  const OpId x = add(b, "x", {{s, 1}});
  const OpId y = add(b, "y", {{s, 0}, {s, 1}});
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.num_outputs(s), 2u);
  EXPECT_EQ(g.tensor_bytes({s, 1}), 200);
  ASSERT_EQ(g.consumers({s, 0}).size(), 1u);
  EXPECT_EQ(g.consumers({s, 0})[0], y);
  ASSERT_EQ(g.consumers({s, 1}).size(), 2u);
  EXPECT_EQ(g.consumers({s, 1})[0], x);
  EXPECT_EQ(g.successors(s).size(), 2u);  // x and y once each
}

TEST(GraphTest, BytesBetweenCountsEachTensorTheConsumerReadsOnce) {
  GraphBuilder b("m", "test");
  const OpId s = add(b, "split", {}, {100, 200, 400});
  const OpId x = add(b, "x", {{s, 1}});
  const OpId y = add(b, "y", {{s, 0}, {s, 2}, {s, 2}});
  const OpId z = add(b, "z", {{x, 0}});
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.bytes_between(s, x), 200);
  EXPECT_EQ(g.bytes_between(s, y), 500);  // outputs 0 and 2; output 2 read twice, counted once
  EXPECT_EQ(g.bytes_between(s, z), 0);    // not a successor
  EXPECT_EQ(g.bytes_between(x, s), 0);    // the wrong way round
}

TEST(GraphTest, SameTensorTwiceIsOneConsumer) {
  GraphBuilder b("sq", "test");
  const OpId a = add(b, "a");
  add(b, "sq", {{a, 0}, {a, 0}});
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.consumers({a, 0}).size(), 1u);
  EXPECT_EQ(g.num_edges(), 1u);
}

TEST(GraphTest, ColocationGroupsNumberedByFirstOp) {
  GraphBuilder b("g", "test");
  b.add_op({.name = "a", .colocate = "L1"});
  b.add_op({.name = "b"});
  b.add_op({.name = "c", .colocate = "L1"});
  const Graph g = std::move(b).build();
  ASSERT_EQ(g.num_groups(), 2u);
  EXPECT_EQ(g.group_of(OpId(0)), GroupId(0));
  EXPECT_EQ(g.group_of(OpId(2)), GroupId(0));
  EXPECT_EQ(g.group_of(OpId(1)), GroupId(1));
  EXPECT_EQ(g.group_name(GroupId(0)), "L1");
  EXPECT_EQ(g.group_name(GroupId(1)), "b");
  EXPECT_EQ(g.group_ops(GroupId(0)).size(), 2u);
}

TEST(GraphTest, CycleMessageNamesTheOpsOnIt) {
  GraphBuilder b("cyc", "cyc.json");
  add(b, "src");
  b.add_op({.name = "p", .inputs = {{OpId(0), 0}, {OpId(3), 0}}});
  b.add_op({.name = "q", .inputs = {{OpId(1), 0}}});
  b.add_op({.name = "r", .inputs = {{OpId(2), 0}}});
  EXPECT_EQ(build_error(std::move(b)), "cyc.json: graph has a cycle: 'p' -> 'q' -> 'r' -> 'p'");
}

TEST(GraphTest, SelfLoopIsACycle) {
  GraphBuilder b("self", "s.json");
  b.add_op({.name = "a", .inputs = {{OpId(0), 0}}});
  EXPECT_EQ(build_error(std::move(b)),
            "s.json: op 'a': op consumes its own output (cycle of length 1)");
}

TEST(GraphTest, DuplicateNameIsRejected) {
  GraphBuilder b("dup", "d.json");
  add(b, "a");
  add(b, "a");
  EXPECT_EQ(build_error(std::move(b)), "d.json: op 'a': duplicate op name");
}

TEST(GraphTest, BadOutputIndexIsRejected) {
  GraphBuilder b("bad", "b.json");
  const OpId a = add(b, "a");
  add(b, "c", {{a, 3}});
  EXPECT_EQ(build_error(std::move(b)), "b.json: op 'c': input 'a:3': op 'a' has only 1 output(s)");
}

TEST(GraphTest, NegativeNumbersAreRejected) {
  GraphBuilder b("neg", "n.json");
  b.add_op({.name = "a", .flops = -1});
  EXPECT_EQ(build_error(std::move(b)),
            "n.json: op 'a': field 'flops': must be a non-negative number, got -1");
  GraphBuilder c("neg", "n.json");
  c.add_op({.name = "a", .output_bytes = {-5}});
  EXPECT_EQ(build_error(std::move(c)),
            "n.json: op 'a': field 'output_bytes': must be non-negative, got -5");
}

TEST(GraphTest, NumbersAboveTheirLimitsAreRejected) {
  // 1.7e308 FLOPs used to give finite but absurd step times.
  GraphBuilder b("big", "big.json");
  b.add_op({.name = "a", .flops = 1.7e308});
  EXPECT_EQ(build_error(std::move(b)),
            "big.json: op 'a': field 'flops': 1.7e+308 is above the limit of 1e+21");
  GraphBuilder c("big", "big.json");
  c.add_op({.name = "a", .bytes_accessed = 1e19});
  EXPECT_EQ(build_error(std::move(c)),
            "big.json: op 'a': field 'bytes_accessed': 1e+19 is above the limit of 9e+18");
  GraphBuilder d("big", "big.json");
  d.add_op({.name = "a", .time_s = {{.device = "gpu", .time_s = 2e6}}});
  EXPECT_EQ(build_error(std::move(d)),
            "big.json: op 'a': field 'time_s.gpu': 2e+06 s is above the limit of 1e+06 s");
  GraphBuilder e("big", "big.json");
  e.add_op({.name = "a", .flops = kMaxOpFlops, .time_s = {{.device = "gpu", .time_s = 1e6}}});
  EXPECT_NO_THROW(std::move(e).build());
}

TEST(GraphTest, ByteTotalAboveTheLimitIsRejected) {
  // Each count is a valid int64, but their sums (memory, group edges) overflowed.
  GraphBuilder b("big", "big.json");
  const OpId x = b.add_op({.name = "x", .output_bytes = {int64_t{1} << 59}});
  b.add_op({.name = "y", .inputs = {{x, 0}}});
  b.add_op({.name = "z", .inputs = {{x, 0}}});
  b.add_op({.name = "w", .inputs = {{x, 0}}});
  EXPECT_EQ(build_error(std::move(b)),
            "big.json: the graph's byte counts add up to 1729382256910270464 (parameters, "
            "temporaries, and "
            "outputs once per consumer), more than the limit of 2^60 = 1152921504606846976");
  GraphBuilder c("fits", "fits.json");
  const OpId a = c.add_op({.name = "a", .output_bytes = {int64_t{1} << 58}});
  c.add_op({.name = "b", .inputs = {{a, 0}}, .param_bytes = int64_t{1} << 58});
  EXPECT_NO_THROW(std::move(c).build());
  // Exactly: one byte past 2^60 is refused (a sum in doubles let totals up to 2^60 + 127 through).
  GraphBuilder d("edge", "edge.json");
  d.add_op({.name = "p", .param_bytes = (int64_t{1} << 60) + 1});
  EXPECT_NE(build_error(std::move(d)).find("more than the limit of 2^60"), std::string::npos);
  GraphBuilder e("at", "at.json");
  e.add_op({.name = "p", .param_bytes = int64_t{1} << 60});
  EXPECT_NO_THROW(std::move(e).build());
}

TEST(GraphTest, NamesThatAreNotUtf8AreRejected) {
  // ONNX and PipeDream files may hold any bytes; writing them as JSON aborted dplace.
  GraphBuilder b("bad", "u.onnx");
  b.add_op({.name = "conv\xff"
                    "1"});
  EXPECT_EQ(build_error(std::move(b)), "u.onnx: op 'conv\\xff1': field 'name': not valid UTF-8");
  GraphBuilder c("bad", "u.onnx");
  c.add_op({.name = "a", .type = "Conv\xc0\xaf"});  // an overlong '/'
  EXPECT_EQ(build_error(std::move(c)),
            "u.onnx: op 'a': field 'type': 'Conv\\xc0\\xaf' is not valid UTF-8");
  GraphBuilder d("caf\xc3\xa9 \xe2\x82\xac", "u.onnx");  // "café €" is fine
  d.add_op({.name = "\xf0\x9f\x98\x80", .colocate = "\xe4\xb8\xad"});
  EXPECT_NO_THROW(std::move(d).build());
}

TEST(GraphTest, EmptyNameIsRejected) {
  GraphBuilder b("e", "e.json");
  b.add_op({.name = ""});
  EXPECT_EQ(build_error(std::move(b)), "e.json: op #0: field 'name': must not be empty");
}

TEST(GraphTest, PhaseNamesRoundTrip) {
  for (Phase p : {Phase::kForward, Phase::kBackward, Phase::kUpdate, Phase::kUnspecified}) {
    EXPECT_EQ(parse_phase(phase_name(p)), p);
  }
  EXPECT_FALSE(parse_phase("sideways").has_value());
}

}  // namespace
}  // namespace dplace
