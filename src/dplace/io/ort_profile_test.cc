#include "dplace/io/ort_profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "dplace/cluster/cluster_json.h"
#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"
#include "dplace/cost/cost_model.h"
#include "dplace/io/graph_json.h"

namespace dplace {
namespace {

const std::string kData = DPLACE_TEST_DATA_DIR;

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = scratch_path(name);
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

// One node as onnxruntime's profiler records it in a run: its fence event (not read) and its
// kernel event. The op type is the graph's for the tiny graph's ops, else "Conv".
struct Ev {
  std::string node;
  double dur_us = 0;
  std::string provider = "CPUExecutionProvider";
  std::string output_shape = "[1,128]";
  std::string node_index = "";  // empty: the node's own, derived from its name
};

std::string event_text(const Ev& e) {
  const std::string op_type = e.node == "mm" ? "MatMul" : e.node == "y" ? "Relu" : "Conv";
  const std::string index =
      e.node_index.empty() ? std::to_string(std::hash<std::string>{}(e.node) % 1000) : e.node_index;
  return R"({"cat" : "Node","pid" :7,"tid" :7,"dur" :1,"ts" :10,"ph" : "X","name" :")" + e.node +
         R"(_fence_before","args" : {"op_name" : ")" + op_type + R"("}},)" +
         R"({"cat" : "Node","pid" :7,"tid" :7,"dur" :)" + std::to_string(e.dur_us) +
         R"(,"ts" :11,"ph" : "X","name" :")" + e.node + R"(_kernel_time","args" : {"op_name" : ")" +
         op_type + R"(","provider" : ")" + e.provider + R"(","node_index" : ")" + index +
         R"(","output_type_shape" : [{"float":)" + e.output_shape +
         R"(}],"thread_scheduling_stats" : {}}})";
}

// A profile of `runs`: each run is a list of node events, wrapped in the session events.
std::string profile_text(const std::vector<std::vector<Ev>>& runs) {
  std::string text = R"([{"cat" : "Session","pid" :7,"tid" :7,"dur" :900,"ts" :1,"ph" : "X",)"
                     R"("name" :"model_loading_uri","args" : {}})";
  for (const std::vector<Ev>& run : runs) {
    for (const Ev& ev : run) text += ",\n" + event_text(ev);
    text += R"(,{"cat" : "Session","pid" :7,"tid" :7,"dur" :500,"ts" :90,"ph" : "X",)"
            R"("name" :"model_run","args" : {}})";
  }
  return text + "]\n";
}

std::string error_of(const ProfileSpec& spec) {
  try {
    read_ort_profile(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

double time_on(const Op& op, const std::string& device) {
  for (const TimeOverride& t : op.time_s) {
    if (t.device == device) return t.time_s;
  }
  return -1;
}

TEST(OrtProfileTest, ReadsNodeKernelEventsOnePerRunWithTheirProviders) {
  const std::string path = write_temp(
      "runs.json",
      profile_text({{Ev{"mm", 900, "CPUExecutionProvider"}, Ev{"y", 40, "CPUExecutionProvider"}},
                    {Ev{"mm", 100, "CPUExecutionProvider"}, Ev{"y", 20, "CPUExecutionProvider"}},
                    {Ev{"mm", 120, "CPUExecutionProvider"}, Ev{"y", 30, "CPUExecutionProvider"}}}));
  const OrtProfile p = read_ort_profile({.path = path, .device = ""});
  ASSERT_EQ(p.nodes.size(), 2u);
  EXPECT_EQ(p.nodes[0].name, "mm");
  EXPECT_EQ(p.nodes[0].device, "cpu");
  EXPECT_EQ(p.nodes[0].provider, "CPUExecutionProvider");
  EXPECT_EQ(p.nodes[0].run_times_s, (std::vector<double>{900e-6, 100e-6, 120e-6}));
  EXPECT_EQ(p.nodes[0].output0_shape, (std::vector<int64_t>{1, 128}));
  EXPECT_EQ(p.nodes[1].name, "y");
  EXPECT_EQ(median_s(p.nodes[0].run_times_s), 120e-6);  // the slow first run left out
  EXPECT_EQ(median_s({4, 1, 3, 2}), 2.5);
}

TEST(OrtProfileTest, ProvidersGiveTheDeviceKindAndFileEqualsDeviceNamesTheAccelerator) {
  // A CUDA session with one node falling back to the CPU, as onnxruntime assigns Shape-like ops.
  const std::string path = write_temp(
      "cuda.json",
      profile_text({{Ev{"mm", 50, "CUDAExecutionProvider"}, Ev{"y", 7, "CPUExecutionProvider"}}}));
  const OrtProfile by_kind = read_ort_profile({.path = path, .device = ""});
  EXPECT_EQ(by_kind.nodes[0].device, "gpu");
  EXPECT_EQ(by_kind.nodes[1].device, "cpu");
  const OrtProfile named = read_ort_profile({.path = path, .device = "/gpu:1"});
  EXPECT_EQ(named.nodes[0].device, "/gpu:1");
  EXPECT_EQ(named.nodes[1].device, "cpu");  // the CPU fallback stays on the CPU

  // A CPU-only profile gives all its times to the named device.
  const std::string cpu =
      write_temp("cpu.json", profile_text({{Ev{"mm", 50, "CPUExecutionProvider"}}}));
  EXPECT_EQ(read_ort_profile({.path = cpu, .device = "/cpu:0"}).nodes[0].device, "/cpu:0");

  // A provider whose device is not known needs the device named.
  const std::string ov =
      write_temp("ov.json", profile_text({{Ev{"mm", 50, "OpenVINOExecutionProvider"}}}));
  EXPECT_EQ(error_of({.path = ov, .device = ""}),
            ov +
                ": node 'mm' ran on 'OpenVINOExecutionProvider', whose device dplace cannot "
                "tell; name it: --profile " +
                ov + "=DEVICE (a device kind or device name)");
  EXPECT_EQ(read_ort_profile({.path = ov, .device = "accel"}).nodes[0].device, "accel");
}

TEST(OrtProfileTest, MalformedProfilesAreOneLineErrorsNamingTheEvent) {
  const auto error_for = [](const std::string& text) {
    return error_of({.path = write_temp("bad.json", text), .device = ""});
  };
  const std::string bad = scratch_path("bad.json");
  EXPECT_EQ(error_for(R"({"format": "dplace.graph/1"})"),
            bad +
                ": not an onnxruntime profile: expected a JSON array of trace events (or an "
                "object with one under 'traceEvents')");
  EXPECT_EQ(error_for("[1]"), bad + ": event 0: expected a JSON object");
  EXPECT_EQ(error_for(R"([{"cat":"Session","name":"model_run","dur":1}, null])"),
            bad + ": event 1: expected a JSON object");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"mm_kernel_time","dur":-3}])"),
            bad + ": event 0 ('mm_kernel_time'): field 'dur': must be non-negative, got -3");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"mm_kernel_time","dur":"12"}])"),
            bad + ": event 0 ('mm_kernel_time'): field 'dur': expected a number");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"mm_kernel_time"}])"),
            bad + ": event 0 ('mm_kernel_time'): field 'dur': missing");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"mm_kernel_time","dur":1e13,)"
                      R"("args":{"provider":"CPUExecutionProvider"}}])"),
            bad +
                ": event 0 ('mm_kernel_time'): field 'dur': 10000000000000 microseconds is more "
                "than 1e+06 s");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"_kernel_time","dur":1}])"),
            bad + ": event 0 ('_kernel_time'): field 'name': a node event without a node name");
  EXPECT_EQ(error_for("[{\"cat\":\"Node\",\"name\":\"a\\nb_kernel_time\",\"dur\":-1}]"),
            bad + ": event 0 ('a\\x0ab_kernel_time'): field 'dur': must be non-negative, got -1");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":3,"dur":1}])"),
            bad + ": event 0: field 'name': expected a string");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"mm_kernel_time","dur":1,"args":{"provider":5}}])"),
            bad + ": event 0 ('mm_kernel_time'): args: field 'provider': expected a string");
  EXPECT_EQ(error_for(R"([{"cat":"Session","name":"model_run","dur":1}])"),
            bad +
                ": no node events (\"cat\": \"Node\", named <node>_kernel_time); is it the "
                "profile of at least one onnxruntime session run?");
  EXPECT_EQ(error_for("[{\"cat\":\"Node\",\"name\":\"mm_kernel_time\",\"dur\":1}")
                .rfind(bad + ": truncated JSON at byte 48: ", 0),
            0u);
  // Chrome's object form is read too.
  EXPECT_EQ(error_for(R"({"traceEvents": [{"cat":"Node","name":"mm_kernel_time","dur":1,)"
                      R"("args":{"provider":"CPUExecutionProvider"}}]})"),
            "");
}

class ApplyOrtProfileTest : public ::testing::Test {
 protected:
  // x (Input) -> mm (MatMul, times on gpu and /cpu:0 in the file) -> y (Relu)
  Graph graph_ = read_graph_file(kData + "/io/tiny_graph.json");
  Cluster cluster_ = read_cluster_file(kData + "/io/tiny_cluster.json");

  OrtProfile read(const std::string& name, const std::vector<std::vector<Ev>>& runs,
                  const std::string& device = "") {
    return read_ort_profile({.path = write_temp(name, profile_text(runs)), .device = device});
  }
  static std::string what(const std::function<void()>& run) {
    try {
      run();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(ApplyOrtProfileTest, MediansReplaceTheCostModelOnTheDeviceKind) {
  const OrtProfile cpu =
      read("cpu.json",
           {{Ev{"mm", 300}, Ev{"y", 8}}, {Ev{"mm", 200}, Ev{"y", 6}}, {Ev{"mm", 250}, Ev{"y", 9}}});
  const MeasuredGraph m = apply_ort_profiles(graph_, {cpu});
  const Op& mm = m.graph.op(*m.graph.find_op("mm"));
  EXPECT_EQ(time_on(mm, "cpu"), 250e-6);
  EXPECT_EQ(time_on(mm, "gpu"), 0.0012);   // the file's own times stay
  EXPECT_EQ(time_on(mm, "/cpu:0"), 0.02);  // and a device name still wins over the kind
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  // Which kind /cpu:0 is only the cluster says: the CLI warns (CliTest).
  ASSERT_EQ(m.profiles.named_times.size(), 1u);
  EXPECT_EQ(m.profiles.named_times[0].op, *m.graph.find_op("mm"));
  EXPECT_EQ(m.profiles.named_times[0].kind, "cpu");
  EXPECT_EQ(m.profiles.named_times[0].device_name, "/cpu:0");
  const Op& y = m.graph.op(*m.graph.find_op("y"));
  EXPECT_EQ(time_on(y, "cpu"), 8e-6);
  ASSERT_EQ(m.profiles.targets.size(), 1u);
  EXPECT_EQ(m.profiles.targets[0].device, "cpu");
  EXPECT_FALSE(m.profiles.targets[0].from_spec);
  EXPECT_EQ(m.profiles.targets[0].ops.size(), 2u);

  // The cost table uses them: y on the CPU takes its median, not the roofline's estimate.
  const CostTable costs(m.graph, cluster_);
  EXPECT_EQ(costs.time_s(*m.graph.find_op("y"), DeviceId(0)), 8e-6);
  EXPECT_EQ(costs.time_s(*m.graph.find_op("mm"), DeviceId(0)), 0.02);
  // Everything else about the graph is unchanged: each op as the graph file writes it.
  const Json before = graph_to_json(graph_), after = graph_to_json(m.graph);
  ASSERT_EQ(before["ops"].size(), after["ops"].size());
  for (size_t i = 0; i < before["ops"].size(); ++i) {
    Json a = before["ops"][i], b = after["ops"][i];
    a.erase("time_s");
    b.erase("time_s");
    EXPECT_EQ(a, b) << i;
  }
  EXPECT_EQ(m.graph.num_groups(), graph_.num_groups());
}

TEST_F(ApplyOrtProfileTest, WarnsAboutWhatTheProfileDoesNotCover) {
  // One run, a node the graph lacks, and y not profiled at all.
  const OrtProfile gpu =
      read("gpu.json",
           {{Ev{"mm", 30, "CUDAExecutionProvider"}, Ev{"Shape_3", 10, "CUDAExecutionProvider"}}});
  const std::string path = scratch_path("gpu.json");
  const MeasuredGraph m = apply_ort_profiles(graph_, {gpu});
  EXPECT_EQ(m.warnings,
            (std::vector<std::string>{
                path + ": 1 of its 2 profiled nodes (25.0% of their time) names no op of graph "
                       "'tiny': folded or aliased on import, fused by onnxruntime, inside an If, "
                       "Loop or Scan, or from another model (first: 'Shape_3')",
                path + ": 1 node ran fewer than 3 times (first: 'mm'); onnxruntime's first run "
                       "includes one-time work, which the median of three or more runs leaves "
                       "out",
                "--profile: 1 forward op with work has no measured time and keeps the cost "
                "model's estimates (first: 'y')"}));
  EXPECT_EQ(time_on(m.graph.op(*m.graph.find_op("mm")), "gpu"), 30e-6);  // replaced the file's
}

TEST_F(ApplyOrtProfileTest, AShapeOtherThanTheGraphsSaysTheProfileRanAtOtherSizes) {
  // The ONNX importer keeps each op's output shapes; an imported graph written by `info -o` too.
  Graph shaped = read_graph_json(Json::parse(R"({"format": "dplace.graph/1", "name": "g", "ops": [
        {"name": "conv", "type": "Conv", "flops": 1e6, "output_bytes": 4096,
         "output_shapes": [[1, 8, 8, 16]]}]})"),
                                 "g.json");
  const OrtProfile p = read("shape.json", {{Ev{"conv", 5, "CPUExecutionProvider", "[4,8,8,16]"}},
                                           {Ev{"conv", 5, "CPUExecutionProvider", "[4,8,8,16]"}},
                                           {Ev{"conv", 5, "CPUExecutionProvider", "[4,8,8,16]"}}});
  const MeasuredGraph m = apply_ort_profiles(shaped, {p});
  EXPECT_EQ(
      m.warnings,
      (std::vector<std::string>{scratch_path("shape.json") +
                                ": 1 node has another first output shape than the graph's (node "
                                "'conv': profiled [4,8,8,16], the graph's [1,8,8,16]); was the "
                                "profile run at other input sizes (--dim)?"}));
  // A dimension beyond int64 is no shape: nothing to compare.
  const OrtProfile huge =
      read("huge.json", {{Ev{"conv", 5, "CPUExecutionProvider", "[18446744073709551615,8,8,16]"}},
                         {Ev{"conv", 5}},
                         {Ev{"conv", 5}}});
  EXPECT_FALSE(huge.nodes[0].output0_shape.has_value());
}

TEST_F(ApplyOrtProfileTest, AProfileOfAnotherModelOrTwoProfilesOfOneDeviceAreRefused) {
  const OrtProfile other =
      read("other.json", {{Ev{"conv1", 30}, Ev{"relu1", 3}, Ev{"pool", 1}, Ev{"fc", 2}}});
  EXPECT_EQ(what([&] { apply_ort_profiles(graph_, {other}); }),
            scratch_path("other.json") +
                ": none of its 4 profiled nodes names an op of graph 'tiny' (first: 'conv1', "
                "'relu1', 'pool', ...); profile the same model, with onnxruntime's graph "
                "optimizations off so that nodes keep their names, on providers that run node by "
                "node (TensorRT and MIGraphX replace the graph with nodes of their own)");
  const OrtProfile a = read("a.json", {{Ev{"y", 3}}});
  const OrtProfile b = read("b.json", {{Ev{"y", 4}}});
  EXPECT_EQ(what([&] {
              apply_ort_profiles(graph_, {a, b});
            }),
            "--profile: op 'y' is timed on 'cpu' by both " + scratch_path("a.json") + " and " +
                scratch_path("b.json") + "; give each device one profile");
  // A CPU profile and a GPU profile of one model go together.
  const OrtProfile g = read("g.json", {{Ev{"y", 1, "CUDAExecutionProvider"}}});
  const MeasuredGraph m = apply_ort_profiles(graph_, {a, g});
  const Op& y = m.graph.op(*m.graph.find_op("y"));
  EXPECT_EQ(time_on(y, "cpu"), 3e-6);
  EXPECT_EQ(time_on(y, "gpu"), 1e-6);
}

TEST_F(ApplyOrtProfileTest, ACpuProfileWinsOverTheCpuFallbackOfAGpuProfile) {
  // A CUDA session runs y on the CPU (onnxruntime's fallback); a CPU session times it too.
  const OrtProfile cuda =
      read("cuda.json", {{Ev{"mm", 40, "CUDAExecutionProvider"}, Ev{"y", 9}}}, "/gpu:0");
  const OrtProfile cpu = read("cpu.json", {{Ev{"mm", 900}, Ev{"y", 5}}});
  for (const auto& order :
       {std::vector<OrtProfile>{cuda, cpu}, std::vector<OrtProfile>{cpu, cuda}}) {
    const MeasuredGraph m = apply_ort_profiles(graph_, order);
    const Op& y = m.graph.op(*m.graph.find_op("y"));
    EXPECT_EQ(time_on(y, "cpu"), 5e-6);
    EXPECT_EQ(time_on(m.graph.op(*m.graph.find_op("mm")), "/gpu:0"), 40e-6);
  }
  // Alone, the fallback times the op on the CPU.
  const MeasuredGraph alone = apply_ort_profiles(graph_, {cuda});
  EXPECT_EQ(time_on(alone.graph.op(*alone.graph.find_op("y")), "cpu"), 9e-6);
}

TEST_F(ApplyOrtProfileTest, NamesAreOnnxruntimesAndTypesMustAgree) {
  // The ONNX importer records onnxruntime's name of an unnamed node where it differs from its own.
  Graph unnamed = read_graph_json(Json::parse(R"({"format": "dplace.graph/1", "name": "u", "ops": [
        {"name": "x", "type": "Input", "output_bytes": 64},
        {"name": "Relu_1", "type": "Relu", "inputs": ["x"], "flops": 16, "output_bytes": 64,
         "onnxruntime_name": "Relu_0"},
        {"name": "Relu_2", "type": "Relu", "inputs": ["Relu_1"], "flops": 16, "output_bytes": 64,
         "onnxruntime_name": "Relu_1"}]})"),
                                  "u.json");
  const auto relu = [](const std::string& node, double us) {
    Ev e{node, us};
    return e;
  };
  std::string text = profile_text({{relu("Relu_0", 10), relu("Relu_1", 20)},
                                   {relu("Relu_0", 10), relu("Relu_1", 20)},
                                   {relu("Relu_0", 10), relu("Relu_1", 20)}});
  // event_text gives unknown nodes the type Conv: make these Relu, as onnxruntime writes them.
  for (size_t at = text.find("\"Conv\""); at != std::string::npos; at = text.find("\"Conv\"")) {
    text.replace(at, 6, "\"Relu\"");
  }
  const OrtProfile p = read_ort_profile({.path = write_temp("relu.json", text), .device = ""});
  const MeasuredGraph m = apply_ort_profiles(unnamed, {p});
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  EXPECT_EQ(time_on(m.graph.op(*m.graph.find_op("Relu_1")), "cpu"), 10e-6);  // onnxruntime's Relu_0
  EXPECT_EQ(time_on(m.graph.op(*m.graph.find_op("Relu_2")), "cpu"), 20e-6);

  // A node whose op has another type is not that op's time; a name several nodes share is none.
  const OrtProfile typed = read("typed.json", {{Ev{"y", 3}, Ev{"mm", 70}}});
  Json doc = graph_to_json(graph_);
  doc["ops"][2]["type"] = "Gelu";  // y
  const Graph retyped = read_graph_json(doc, "retyped.json");
  const MeasuredGraph m2 = apply_ort_profiles(retyped, {typed});
  EXPECT_EQ(time_on(m2.graph.op(*m2.graph.find_op("y")), "cpu"), -1);
  EXPECT_EQ(m2.warnings.at(0), scratch_path("typed.json") +
                                   ": 1 node names an op of another type, so its time is not used "
                                   "(node 'y': 'Relu' in the profile, 'Gelu' in the graph)");
  const OrtProfile shared =
      read("shared.json", {{Ev{"y", 3, "CPUExecutionProvider", "[1,128]", "4"},
                            Ev{"y", 5, "CPUExecutionProvider", "[1,128]", "9"}, Ev{"mm", 70}}});
  EXPECT_TRUE(shared.nodes[0].ambiguous);
  // Two nodes of one name on two providers are as ambiguous.
  const OrtProfile across =
      read("across.json", {{Ev{"y", 3, "CUDAExecutionProvider", "[1,128]", "4"},
                            Ev{"y", 5, "CPUExecutionProvider", "[1,128]", "9"}, Ev{"mm", 70}}});
  ASSERT_EQ(across.nodes.size(), 3u);
  EXPECT_TRUE(across.nodes[0].ambiguous);
  EXPECT_TRUE(across.nodes[1].ambiguous);
  EXPECT_FALSE(across.nodes[2].ambiguous);
  const MeasuredGraph m3 = apply_ort_profiles(graph_, {shared});
  EXPECT_EQ(time_on(m3.graph.op(*m3.graph.find_op("y")), "cpu"), -1);
  EXPECT_EQ(m3.warnings.at(0), scratch_path("shared.json") +
                                   ": 1 name several nodes share, so their times are not used "
                                   "(first: 'y')");
}

TEST(OrtProfileSpecTest, FileEqualsDeviceSplitsAtTheLastEqualsUnlessTheFileExists) {
  EXPECT_EQ(parse_profile_spec("run.json").path, "run.json");
  EXPECT_EQ(parse_profile_spec("run.json").device, "");
  const std::string dir = scratch_path("a=b");
  std::filesystem::create_directories(dir);
  write_temp("a=b/run.json", "[]");
  const ProfileSpec split = parse_profile_spec(dir + "/run.json=/gpu:1");
  EXPECT_EQ(split.path, dir + "/run.json");
  EXPECT_EQ(split.device, "/gpu:1");
  try {
    parse_profile_spec("run=3.json");
    FAIL() << "a file that is not there was taken";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--profile 'run=3.json': no such file, nor is 'run' one (read as FILE=DEVICE with "
              "device '3.json')");
  }
  const std::string odd = write_temp("batch=8.json", "[]");
  EXPECT_EQ(parse_profile_spec(odd).path, odd);
  EXPECT_EQ(parse_profile_spec(odd).device, "");
  EXPECT_THROW(parse_profile_spec("run.json="), ConfigError);
  EXPECT_THROW(parse_profile_spec("=gpu"), ConfigError);
}

}  // namespace
}  // namespace dplace
