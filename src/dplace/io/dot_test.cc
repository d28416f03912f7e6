#include "dplace/io/dot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dplace/cluster/cluster_json.h"
#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"

namespace dplace {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + 1)) ++n;
  return n;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool graphviz_installed() { return std::system("dot -V > /dev/null 2>&1") == 0; }

Cluster two_gpus() {
  return parse_cluster_json(Json::parse(R"({ "format": "dplace.cluster/1", "name": "box",
    "devices": [
      { "name": "/cpu:0", "kind": "cpu", "peak_flops": 1e12, "mem_bandwidth_bytes_per_s": 5e10,
        "memory_bytes": 1e10 },
      { "name": "/gpu:0", "kind": "gpu", "peak_flops": 4e12, "mem_bandwidth_bytes_per_s": 2e11,
        "memory_bytes": 1e10 },
      { "name": "/gpu:1", "kind": "gpu", "peak_flops": 4e12, "mem_bandwidth_bytes_per_s": 2e11,
        "memory_bytes": 1e10 } ],
    "default_link": { "bandwidth_bytes_per_s": 1e10 } })"),
                            "inline");
}

// x -> a -> b -> y with a and b colocated in "layer1"; x also feeds y directly.
Graph small_graph() {
  GraphBuilder b("small", "inline");
  const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {4096}});
  const OpId a = b.add_op({.name = "a",
                           .type = "MatMul",
                           .inputs = {{x, 0}},
                           .output_bytes = {1536},
                           .colocate = "layer1"});
  const OpId bb = b.add_op({.name = "b",
                            .type = "Relu",
                            .inputs = {{a, 0}},
                            .output_bytes = {512},
                            .colocate = "layer1"});
  b.add_op({.name = "y \"out\"", .inputs = {{bb, 0}, {x, 0}}, .output_bytes = {8}});
  return std::move(b).build();
}

TEST(DotTest, FormatsByteCounts) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(4096), "4 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(12e9), "11.2 GiB");
  EXPECT_EQ(format_bytes(300.0 * 1024 * 1024), "300 MiB");
}

TEST(DotTest, OpsAreColouredByDeviceWithALegend) {
  const Graph g = small_graph();
  const Cluster c = two_gpus();
  const Placement p{{DeviceId(0), DeviceId(1), DeviceId(1), DeviceId(2)}};
  const std::string dot = graph_to_dot(g, &c, &p);
  EXPECT_TRUE(contains(dot, "digraph \"small\" {")) << dot;
  EXPECT_TRUE(contains(dot, "n0 [label=\"x\\nInput\", fillcolor=\"#8dd3c7\"]")) << dot;
  EXPECT_TRUE(contains(dot, "n1 [label=\"a\\nMatMul\", fillcolor=\"#ffffb3\"]")) << dot;
  EXPECT_TRUE(contains(dot, "n3 [label=\"y \\\"out\\\"\", fillcolor=\"#bebada\"]")) << dot;
  EXPECT_TRUE(contains(dot, "legend_0 [label=\"/cpu:0\\n1 ops\", fillcolor=\"#8dd3c7\"]")) << dot;
  EXPECT_TRUE(contains(dot, "legend_1 [label=\"/gpu:0\\n2 ops\", fillcolor=\"#ffffb3\"]")) << dot;
  EXPECT_TRUE(contains(dot, "label=\"small on box\"")) << dot;
}

TEST(DotTest, ColocationGroupsOfSeveralOpsAreClusters) {
  const Graph g = small_graph();
  const std::string dot = graph_to_dot(g, nullptr, nullptr);
  EXPECT_EQ(count(dot, "subgraph cluster_"), 1u) << dot;  // only layer1; no legend unplaced
  const size_t start = dot.find("subgraph cluster_g1 {");
  ASSERT_NE(start, std::string::npos) << dot;
  const std::string body = dot.substr(start, dot.find("  }\n", start) - start);
  EXPECT_TRUE(contains(body, "label=\"layer1\"")) << body;
  EXPECT_TRUE(contains(body, "n1 [")) << body;
  EXPECT_TRUE(contains(body, "n2 [")) << body;
  EXPECT_FALSE(contains(body, "n0 [")) << body;
  // Unplaced ops are white, and every op appears once.
  EXPECT_EQ(count(dot, "fillcolor=\"#ffffff\"]"), 4u) << dot;
}

TEST(DotTest, EdgesCarryTensorSizesAndCrossDeviceEdgesStandOut) {
  const Graph g = small_graph();
  const Cluster c = two_gpus();
  const Placement p{{DeviceId(0), DeviceId(1), DeviceId(1), DeviceId(1)}};
  const std::string dot = graph_to_dot(g, &c, &p);
  EXPECT_TRUE(contains(dot, "n0 -> n1 [label=\"4 KiB\", penwidth=2, color=\"#d62728\"];")) << dot;
  EXPECT_TRUE(contains(dot, "n1 -> n2 [label=\"1.5 KiB\"];")) << dot;
  EXPECT_TRUE(contains(dot, "n2 -> n3 [label=\"512 B\"];")) << dot;
  EXPECT_EQ(count(dot, " -> n"), 4u) << dot;

  DotOptions no_labels;
  no_labels.edge_labels = false;
  const std::string bare = graph_to_dot(g, &c, &p, no_labels);
  EXPECT_TRUE(contains(bare, "n1 -> n2;")) << bare;
  EXPECT_TRUE(contains(bare, "n0 -> n3 [penwidth=2, color=\"#d62728\"];")) << bare;
}

TEST(DotTest, LargeGraphsCollapseToColocationGroups) {
  const Graph g = small_graph();  // 4 ops in 3 groups
  const Cluster c = two_gpus();
  const Placement p{{DeviceId(0), DeviceId(1), DeviceId(2), DeviceId(1)}};
  DotOptions options;
  options.max_nodes = 3;
  const std::string dot = graph_to_dot(g, &c, &p, options);
  EXPECT_TRUE(contains(dot, "4 ops shown as 3 colocation groups")) << dot;
  EXPECT_TRUE(contains(dot,
                       "n1 [label=\"layer1\\n(2 ops)\", fillcolor=\"#ffffb3\", "
                       "style=\"rounded,dashed,filled\"]"))
      << dot;  // split over two devices: dashed
  // x feeds layer1 and y; layer1 feeds y: 4 KiB + 4 KiB + 512 B.
  EXPECT_TRUE(contains(dot, "n0 -> n1 [label=\"4 KiB\"")) << dot;
  EXPECT_TRUE(contains(dot, "n0 -> n2 [label=\"4 KiB\"")) << dot;
  EXPECT_TRUE(contains(dot, "n1 -> n2 [label=\"512 B\"")) << dot;
  EXPECT_EQ(count(dot, " -> n"), 3u) << dot;
}

// A chain of 200 ops in 100 colocated pairs (a training graph's shape, at the size where dot got
// slow op by op) is drawn as its groups even though 200 ops fit in max_nodes; a chain of 200
// uncolocated ops is still drawn op by op.
TEST(DotTest, ColocatedGraphsOfMoreThan150OpsAreDrawnAsGroups) {
  for (const bool colocated : {true, false}) {
    GraphBuilder b("chain", "inline");
    OpId prev = b.add_op({.name = "op0", .output_bytes = {100}, .colocate = colocated ? "g0" : ""});
    for (int i = 1; i < 200; ++i) {
      prev = b.add_op({.name = "op" + std::to_string(i),
                       .inputs = {{prev, 0}},
                       .output_bytes = {100},
                       .colocate = colocated ? "g" + std::to_string(i / 2) : ""});
    }
    const std::string dot = graph_to_dot(std::move(b).build(), nullptr, nullptr, {});
    EXPECT_EQ(contains(dot, "200 ops shown as 100 colocation groups"), colocated) << colocated;
  }
}

Graph scoped_graph() {
  GraphBuilder b("scoped", "inline");
  OpId prev = b.add_op({.name = "enc/l0/a", .output_bytes = {100}});
  for (const char* name :
       {"enc/l0/b", "enc/l1/a", "enc/l1/b", "dec/l0/a", "dec/l0/b", "dec/l1/a", "dec/l1/b"}) {
    prev = b.add_op({.name = name, .inputs = {{prev, 0}}, .output_bytes = {100}});
  }
  return std::move(b).build();
}

TEST(DotTest, GraphsWithManyGroupsCollapseToNameScopes) {
  const Graph g = scoped_graph();
  DotOptions options;
  options.max_nodes = 4;
  const std::string dot = graph_to_dot(g, nullptr, nullptr, options);
  EXPECT_TRUE(contains(dot, "8 ops shown as 4 name scopes (depth 2)")) << dot;
  EXPECT_TRUE(contains(dot, "[label=\"enc/l1\\n(2 ops)\"")) << dot;
  EXPECT_EQ(count(dot, " -> n"), 3u) << dot;  // a chain of four scopes

  options.max_nodes = 2;
  const std::string top = graph_to_dot(g, nullptr, nullptr, options);
  EXPECT_TRUE(contains(top, "8 ops shown as 2 name scopes (depth 1)")) << top;
  EXPECT_TRUE(contains(top, "[label=\"dec\\n(4 ops)\"")) << top;
  EXPECT_TRUE(contains(top, "[label=\"enc\\n(4 ops)\"")) << top;
}

TEST(DotTest, FlatNamesCollapseToOneNodePerDevice) {
  GraphBuilder b("flat", "inline");
  OpId prev = b.add_op({.name = "op0", .output_bytes = {10}});
  for (int i = 1; i < 6; ++i) {
    prev =
        b.add_op({.name = "op" + std::to_string(i), .inputs = {{prev, 0}}, .output_bytes = {10}});
  }
  const Graph g = std::move(b).build();
  const Cluster c = two_gpus();
  const Placement p{{DeviceId(1), DeviceId(1), DeviceId(1), DeviceId(2), DeviceId(2), DeviceId(2)}};
  DotOptions options;
  options.max_nodes = 3;
  const std::string dot = graph_to_dot(g, &c, &p, options);
  EXPECT_TRUE(contains(dot, "6 ops shown as 2 name scopes (depth 0) per device")) << dot;
  EXPECT_TRUE(contains(dot, "n0 [label=\"(all ops)\\n(3 ops)\", fillcolor=\"#ffffb3\"]")) << dot;
  EXPECT_TRUE(contains(dot, "n0 -> n1 [label=\"10 B\", penwidth=2")) << dot;
}

TEST(DotTest, BigPicturesCapGraphvizLayoutPasses) {
  GraphBuilder b("chain", "inline");
  OpId prev = b.add_op({.name = "op0", .output_bytes = {10}});
  for (int i = 1; i < 200; ++i) {
    prev =
        b.add_op({.name = "op" + std::to_string(i), .inputs = {{prev, 0}}, .output_bytes = {10}});
  }
  const Graph g = std::move(b).build();
  const std::string dot = graph_to_dot(g, nullptr, nullptr);  // 200 nodes <= the default 400
  EXPECT_FALSE(contains(dot, "shown as")) << dot.substr(0, 300);
  EXPECT_TRUE(contains(dot, "nslimit=2, nslimit1=2, mclimit=0.2")) << dot.substr(0, 300);
  EXPECT_FALSE(contains(graph_to_dot(small_graph(), nullptr, nullptr), "nslimit"));
  // So do pictures of few nodes and many edges (gnmt8's 136 name scopes and 856 edges took 13.6 s
  // of CPU uncapped): 40 ops, each reading every earlier one, make 780 edges.
  GraphBuilder dense("dense", "inline");
  std::vector<OpId> ops;
  for (int i = 0; i < 40; ++i) {
    Op op{.name = "d" + std::to_string(i), .output_bytes = {10}};
    for (OpId in : ops) op.inputs.push_back({in, 0});
    ops.push_back(dense.add_op(std::move(op)));
  }
  const std::string dense_dot = graph_to_dot(std::move(dense).build(), nullptr, nullptr);
  EXPECT_EQ(count(dense_dot, "->"), 780u);
  EXPECT_TRUE(contains(dense_dot, "nslimit=2")) << dense_dot.substr(0, 300);
}

class DotFileTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) { return scratch_path(name); }
  Graph graph_ = small_graph();
  Cluster cluster_ = two_gpus();
  Placement placement_{{DeviceId(0), DeviceId(1), DeviceId(1), DeviceId(2)}};
};

TEST_F(DotFileTest, DotExtensionWritesTheText) {
  const std::string out = path("p.dot");
  write_dot(graph_, cluster_, &placement_, out);
  EXPECT_EQ(read_text(out), graph_to_dot(graph_, &cluster_, &placement_));
  std::filesystem::remove(out);
}

TEST_F(DotFileTest, SvgIsRenderedByGraphviz) {
  if (!graphviz_installed()) GTEST_SKIP() << "Graphviz 'dot' is not installed";
  const std::string out = path("p.svg");
  write_dot(graph_, cluster_, &placement_, out);
  const std::string svg = read_text(out);
  EXPECT_TRUE(contains(svg, "<svg")) << svg.substr(0, 200);
  EXPECT_TRUE(contains(svg, "MatMul"));
  std::filesystem::remove(out);

  // The collapsed pictures are valid DOT too.
  DotOptions options;
  options.max_nodes = 2;
  write_dot(scoped_graph(), cluster_, nullptr, out, options);
  EXPECT_TRUE(contains(read_text(out), "<svg"));
  std::filesystem::remove(out);
}

// A control character in a name is written as the text \xNN: Graphviz copied the byte into the
// SVG, which XML then refuses (an op named "bell\x01x" made a file browsers would not open).
TEST_F(DotFileTest, ControlCharactersInNamesAreShownAsText) {
  GraphBuilder b("odd", "inline");
  const OpId x = b.add_op({.name = "bell\x01x", .type = "Input", .output_bytes = {4}});
  b.add_op({.name = "del\x7fy", .type = "Relu", .inputs = {{x, 0}}, .output_bytes = {4}});
  const Graph g = std::move(b).build();
  const std::string dot = graph_to_dot(g, nullptr, nullptr);
  EXPECT_TRUE(contains(dot, "[label=\"bell\\\\x01x\\nInput\"")) << dot;
  EXPECT_TRUE(contains(dot, "del\\\\x7fy")) << dot;
  EXPECT_FALSE(contains(dot, "\x01")) << dot;
  if (!graphviz_installed()) GTEST_SKIP() << "Graphviz 'dot' is not installed";
  const std::string out = path("odd.svg");
  write_dot(g, cluster_, nullptr, out);
  const std::string svg = read_text(out);
  EXPECT_TRUE(contains(svg, "bell\\x01x")) << svg;
  for (char c : svg)
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r');
  std::filesystem::remove(out);
}

// Graphviz refuses quoted strings over 16,384 bytes; a valid graph may name an op with more.
TEST_F(DotFileTest, VeryLongNamesAreCutAndStillRender) {
  GraphBuilder b("long", "inline");
  // 'x' and 17,000 bytes of a two-byte UTF-8 character: byte 200 is the second half of one, so
  // the cut comes before it, at 199.
  std::string name = "x";
  for (int i = 0; i < 8500; ++i) name += "\xC3\xA9";
  const OpId x = b.add_op({.name = name, .type = "Input", .output_bytes = {4}});
  b.add_op({.name = "y", .type = "Relu", .inputs = {{x, 0}}, .output_bytes = {4}});
  const Graph g = std::move(b).build();
  const std::string dot = graph_to_dot(g, nullptr, nullptr);
  EXPECT_TRUE(contains(dot, "[label=\"" + name.substr(0, 199) + "...\\nInput\"")) << dot;
  EXPECT_FALSE(contains(dot, name.substr(0, 201)));
  if (!graphviz_installed()) GTEST_SKIP() << "Graphviz 'dot' is not installed";
  const std::string out = path("long.svg");
  write_dot(g, cluster_, nullptr, out);
  EXPECT_TRUE(contains(read_text(out), "<svg"));
  std::filesystem::remove(out);
}

TEST_F(DotFileTest, MissingGraphvizIsAConfigErrorSuggestingDot) {
  DotOptions options;
  options.dot_program = "dplace-no-such-graphviz";
  const std::string out = path("p.svg");
  try {
    write_dot(graph_, cluster_, &placement_, out, options);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m, out +
                     ": cannot render .svg: Graphviz 'dplace-no-such-graphviz' is not installed "
                     "(not found on PATH); install graphviz or write a .dot file instead");
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(DotFileTest, FailingGraphvizIsAConfigError) {
  DotOptions options;
  options.dot_program = "/bin/false";
  const std::string out = path("p.svg");
  try {
    write_dot(graph_, cluster_, &placement_, out, options);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), out + ": Graphviz '/bin/false' failed (exit status 1)");
  }
}

TEST_F(DotFileTest, UnwritableDotPathIsAFormatError) {
  EXPECT_THROW(write_dot(graph_, cluster_, &placement_, "/nonexistent-dir/p.dot"), FormatError);
}

}  // namespace
}  // namespace dplace
