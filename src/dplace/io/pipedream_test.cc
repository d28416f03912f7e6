// Tests of the PipeDream graph.txt reader (on the published profiles, copied with their licence to
// tests/data/workloads/pipedream-profiles, and on small inline profiles) and of load_graph_file's
// format detection.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"
#include "dplace/io/importers.h"

namespace dplace {
namespace {

const std::string kData = DPLACE_TEST_DATA_DIR;
const std::string kProfiles = kData + "/workloads/pipedream-profiles";

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = scratch_path(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

ImportOptions inference() {
  ImportOptions o;
  o.training = false;
  return o;
}

const Op& op_named(const Graph& g, const std::string& name) {
  std::optional<OpId> id = g.find_op(name);
  if (!id) throw std::runtime_error("no op " + name);
  return g.op(*id);
}

double gpu_time(const Op& op) {
  for (const TimeOverride& t : op.time_s) {
    if (t.device == "gpu") return t.time_s;
  }
  return -1;
}

// Input -> Linear -> ReLU, times in ms.
const char* kChain =
    "node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
    "activation_size=64.0, parameter_size=0.000\n"
    "node2 -- Linear(in_features=16, out_features=8) -- forward_compute_time=0.500, "
    "backward_compute_time=1.250, activation_size=32.0, parameter_size=544.000\n"
    "node3 -- ReLU() -- forward_compute_time=0.100, backward_compute_time=0.200, "
    "activation_size=32.0, parameter_size=0.000\n"
    "\tnode1 -- node2\n"
    "\tnode2 -- node3\n";

TEST(PipeDreamTest, PublishedProfilesReadWithTheirNodeAndEdgeCounts) {
  struct Case {
    std::string file;
    size_t nodes;
    size_t edges;
    int64_t parameter_bytes;
  };
  // Counts of node and edge lines in the files; parameter bytes summed from the files.
  for (const Case& c :
       {Case{"gnmt.graph.txt", 48, 58, 775063808}, Case{"resnet50.graph.txt", 177, 193, 102228128},
        Case{"vgg16.graph.txt", 41, 41, 553430176}}) {
    SCOPED_TRACE(c.file);
    const LoadedGraph loaded = read_pipedream_file(kProfiles + "/" + c.file, inference());
    EXPECT_EQ(loaded.format, "pipedream");
    EXPECT_EQ(loaded.graph.num_ops(), c.nodes);
    EXPECT_EQ(loaded.graph.num_edges(), c.edges);
    EXPECT_EQ(loaded.graph.total_param_bytes(), c.parameter_bytes);
    EXPECT_TRUE(loaded.warnings.empty());
  }
}

TEST(PipeDreamTest, MeasuredTimesAreSecondsOnGpusAndAccelerators) {
  const LoadedGraph loaded = read_pipedream_file(kProfiles + "/gnmt.graph.txt", {});
  const Op& embed = op_named(loaded.graph, "node4");
  EXPECT_EQ(embed.type, "Embedding");
  EXPECT_DOUBLE_EQ(gpu_time(embed), 0.073e-3);
  EXPECT_EQ(embed.devices, (std::vector<std::string>{"gpu", "accel"}));
  EXPECT_EQ(embed.param_bytes, 132382720);
  EXPECT_EQ(embed.output_bytes, std::vector<int64_t>{6291456});
  EXPECT_EQ(embed.extra["description"], "Embedding(32320, 1024, padding_idx=0)");
  const Op& grad = op_named(loaded.graph, "grad/node4");
  EXPECT_DOUBLE_EQ(gpu_time(grad), 6.949e-3);
  EXPECT_EQ(grad.phase, Phase::kBackward);
  EXPECT_EQ(grad.colocate, "node4");
  EXPECT_EQ(op_named(loaded.graph, "node1").type, "Input");
}

TEST(PipeDreamTest, GetitemEdgesCarryTheMatchingOutputOfAMultiOutputNode) {
  const LoadedGraph loaded = read_pipedream_file(kProfiles + "/gnmt.graph.txt", inference());
  const Graph& g = loaded.graph;
  const Op& lstm = op_named(g, "node7");
  EXPECT_EQ(lstm.output_bytes, (std::vector<int64_t>{6291456, 131072, 131072}));
  OpId lstm_id = g.find_op("node7").value();
  EXPECT_EQ(op_named(g, "node8").inputs, (std::vector<TensorRef>{{lstm_id, 0}}));
  EXPECT_EQ(op_named(g, "node9").inputs, (std::vector<TensorRef>{{lstm_id, 1}}));
  // "hidden" has one output: every __getitem__ of it reads output 0.
  OpId hidden = g.find_op("node20").value();
  EXPECT_EQ(op_named(g, "node36").inputs, (std::vector<TensorRef>{{hidden, 0}}));
}

TEST(PipeDreamTest, TrainingAddsColocatedBackwardOpsReadingGradientsAndActivations) {
  const LoadedGraph loaded = read_pipedream_file(temp_file("chain.txt", kChain), {});
  const Graph& g = loaded.graph;
  // node1 (an input without work) gets no backward op.
  ASSERT_EQ(g.num_ops(), 5u);
  EXPECT_FALSE(g.find_op("grad/node1").has_value());
  OpId n2 = g.find_op("node2").value(), n3 = g.find_op("node3").value();
  OpId g3 = g.find_op("grad/node3").value();
  const Op& grad3 = g.op(g3);
  // The loss end reads only its own activation; it produces the gradient of node2's output.
  EXPECT_EQ(grad3.inputs, (std::vector<TensorRef>{{n3, 0}}));
  EXPECT_EQ(grad3.output_bytes, std::vector<int64_t>{32});
  const Op& grad2 = op_named(g, "grad/node2");
  EXPECT_EQ(grad2.inputs, (std::vector<TensorRef>{{g3, 0}, {n2, 0}}));
  // The gradient for the network input is not computed.
  EXPECT_EQ(grad2.output_bytes, std::vector<int64_t>{0});
  EXPECT_DOUBLE_EQ(gpu_time(grad2), 1.25e-3);
  EXPECT_EQ(g.group_of(n2), g.group_of(g.find_op("grad/node2").value()));
  EXPECT_EQ(g.num_edges(), 2u + 1 + 2);
  // Backward ops come after every forward op in the topological order.
  EXPECT_GT(g.topo_rank(g.find_op("grad/node2").value()), g.topo_rank(g3));
}

TEST(PipeDreamTest, TrainingGraphOfPublishedProfileHasOneBackwardOpPerWorkingNode) {
  const LoadedGraph loaded = read_pipedream_file(kProfiles + "/vgg16.graph.txt", {});
  size_t forward = 0, backward = 0;
  for (const Op& op : loaded.graph.ops()) {
    if (op.phase == Phase::kForward) ++forward;
    if (op.phase == Phase::kBackward) ++backward;
  }
  EXPECT_EQ(forward, 41u);
  EXPECT_EQ(backward, 40u);  // every node but the input
  double forward_s = 0, backward_s = 0;
  for (const Op& op : loaded.graph.ops()) {
    (op.phase == Phase::kForward ? forward_s : backward_s) += gpu_time(op);
  }
  // Sums of the file's forward and backward columns, in seconds.
  EXPECT_NEAR(forward_s, 251.874e-3, 1e-9);
  EXPECT_NEAR(backward_s, 438.633e-3, 1e-9);
}

TEST(PipeDreamTest, MalformedProfilesGiveOneLineErrorsNamingLineAndField) {
  struct Case {
    std::string file;
    std::string message;
  };
  const std::string dir = kData + "/malformed/pipedream/";
  for (const Case& c : {
           Case{"missing_field.txt",
                "missing_field.txt:2: node 'node2': field "
                "'backward_compute_time' is missing"},
           Case{"bad_number.txt",
                "bad_number.txt:2: node 'node2': field 'forward_compute_time': "
                "expected a non-negative number, got 'fast'"},
           Case{"negative_time.txt",
                "negative_time.txt:2: node 'node2': field "
                "'backward_compute_time': expected a non-negative number"},
           Case{"unknown_edge_node.txt",
                "unknown_edge_node.txt:2: edge node1 -- node9: no node "
                "'node9'"},
           Case{"duplicate_node.txt", "duplicate_node.txt:2: node 'node1' is defined twice"},
           Case{"unterminated_list.txt",
                "unterminated_list.txt:1: node 'node1': unbalanced '[' ']'"},
           Case{"cycle.txt", "cycle"},
           Case{"bad_node_line.txt", "bad_node_line.txt:2: node line is not"},
           Case{"edges_only.txt", "edges_only.txt: no node lines"},
           Case{"bad_edge_line.txt", "bad_edge_line.txt:2: edge line is not"},
           Case{"truncated.txt", "truncated.txt:1: node 'node11': metric 'activ' is not key=value"},
       }) {
    SCOPED_TRACE(c.file);
    try {
      read_pipedream_file(dir + c.file, {});
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find(c.message), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// load_graph_file: format detection.

TEST(LoadGraphTest, DetectsEachFormatFromContent) {
  const LoadedGraph pipedream = load_graph_file(temp_file("profile.dat", kChain), inference());
  EXPECT_EQ(pipedream.format, "pipedream");
  EXPECT_EQ(pipedream.graph.num_ops(), 3u);
  // A byte-order mark is skipped by the detection and by the reader, which used to keep it in
  // the first node's name.
  const LoadedGraph with_bom =
      load_graph_file(temp_file("bom.txt", "\xEF\xBB\xBF" + std::string(kChain)), inference());
  EXPECT_EQ(with_bom.graph.num_ops(), 3u);
  EXPECT_TRUE(with_bom.graph.find_op("node1").has_value());

  const LoadedGraph graph = load_graph_file(kData + "/io/tiny_graph.json", {});
  EXPECT_EQ(graph.format, "dplace.graph/1");
  EXPECT_EQ(graph.graph.num_ops(), 3u);

  const std::string dnn = temp_file("dnn.json",
                                    R"({"maxSizePerFPGA": 1000, "maxFPGAs": 2, "maxCPUs": 1,
          "nodes": [{"id": 1, "supportedOnFpga": 1, "cpuLatency": 10, "fpgaLatency": 1,
                     "isBackwardNode": 0, "size": 10},
                    {"id": 2, "supportedOnFpga": 1, "cpuLatency": 20, "fpgaLatency": 2,
                     "isBackwardNode": 0, "size": 10}],
          "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}]})");
  const LoadedGraph partitioning = load_graph_file(dnn, {});
  EXPECT_EQ(partitioning.format, "dnn-partitioning");
  EXPECT_EQ(partitioning.graph.num_ops(), 2u);
  EXPECT_EQ(partitioning.graph.num_edges(), 1u);

  // White space longer than the first block read for the detection (it was "unrecognised").
  std::ifstream tiny(kData + "/io/tiny_graph.json");
  const std::string tiny_text((std::istreambuf_iterator<char>(tiny)), {});
  const LoadedGraph spaced =
      load_graph_file(temp_file("spaced.json", std::string(10000, ' ') + tiny_text), {});
  EXPECT_EQ(spaced.graph.num_ops(), 3u);
}

TEST(LoadGraphTest, TrainingExpandsAGraphJson) {
  ImportOptions options;
  options.training = true;
  const LoadedGraph loaded = load_graph_file(kData + "/io/tiny_graph.json", options);
  bool has_update = false;
  for (const Op& op : loaded.graph.ops()) has_update |= op.phase == Phase::kUpdate;
  EXPECT_TRUE(has_update);
}

TEST(LoadGraphTest, UnrecognisedContentAndOtherJsonAreFormatErrors) {
  auto error_of = [](const std::string& path) -> std::string {
    try {
      load_graph_file(path, {});
    } catch (const FormatError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(error_of(temp_file("notes.txt", "hello world\n")).find("unrecognised graph format"),
            std::string::npos);
  EXPECT_NE(
      error_of(temp_file("other.json", R"({"nodes": []})")).find("neither a dplace.graph/1 graph"),
      std::string::npos);
  EXPECT_NE(error_of(kData + "/io/tiny_cluster.json")
                .find("field 'format': 'dplace.cluster/1' is not a graph format"),
            std::string::npos);
  EXPECT_NE(error_of(temp_file("empty.txt", "")).find("empty file"), std::string::npos);
  EXPECT_NE(error_of(kData + "/no_such_graph.json").find("cannot open"), std::string::npos);
}

TEST(LoadGraphTest, EveryPublishedWorkloadLoads) {
  // Every graph file under tests/data/workloads (copies of ../shared/workloads with their
  // licences); the expert splits are placements rather than graphs.
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kData + "/workloads")) {
    const std::string path = entry.path().string();
    bool graph_file = path.ends_with(".json") || path.ends_with(".graph.txt");
    if (!entry.is_regular_file() || !graph_file ||
        path.find("human-experts") != std::string::npos) {
      continue;
    }
    SCOPED_TRACE(path);
    const LoadedGraph loaded = load_graph_file(path, {});
    EXPECT_GT(loaded.graph.num_ops(), 0u);
    ++files;
  }
  EXPECT_EQ(files, 3u + 8);  // 3 PipeDream profiles, 8 dnn-partitioning workloads
}

}  // namespace
}  // namespace dplace
