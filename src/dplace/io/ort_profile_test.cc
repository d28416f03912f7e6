#include "dplace/io/ort_profile.h"

#include <gtest/gtest.h>

#include <fstream>
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

// One node event as onnxruntime writes it (its fence events around it are not read).
std::string node_event(const std::string& node, double dur_us, const std::string& provider,
                       const std::string& output_shape = "[1,128]") {
  return R"({"cat" : "Node","pid" :7,"tid" :7,"dur" :)" + std::to_string(dur_us) +
         R"(,"ts" :10,"ph" : "X","name" :")" + node +
         R"(_fence_before","args" : {"op_name" : "X"}},)" +
         R"({"cat" : "Node","pid" :7,"tid" :7,"dur" :)" + std::to_string(dur_us) +
         R"(,"ts" :11,"ph" : "X","name" :")" + node +
         R"(_kernel_time","args" : {"op_name" : "X","provider" : ")" + provider +
         R"(","output_type_shape" : [{"float":)" + output_shape +
         R"(}],"thread_scheduling_stats" : {}}})";
}

// A profile of `runs`: each run is a list of node events, wrapped in the session events.
std::string profile_text(const std::vector<std::vector<std::string>>& runs) {
  std::string text = R"([{"cat" : "Session","pid" :7,"tid" :7,"dur" :900,"ts" :1,"ph" : "X",)"
                     R"("name" :"model_loading_uri","args" : {}})";
  for (const std::vector<std::string>& run : runs) {
    for (const std::string& ev : run) text += ",\n" + ev;
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
  const std::string path =
      write_temp("runs.json", profile_text({{node_event("mm", 900, "CPUExecutionProvider"),
                                             node_event("y", 40, "CPUExecutionProvider")},
                                            {node_event("mm", 100, "CPUExecutionProvider"),
                                             node_event("y", 20, "CPUExecutionProvider")},
                                            {node_event("mm", 120, "CPUExecutionProvider"),
                                             node_event("y", 30, "CPUExecutionProvider")}}));
  const OrtProfile p = read_ort_profile({.path = path, .device = ""});
  ASSERT_EQ(p.nodes.size(), 2u);
  EXPECT_EQ(p.nodes[0].name, "mm");
  EXPECT_EQ(p.nodes[0].device, "cpu");
  EXPECT_EQ(p.nodes[0].provider, "CPUExecutionProvider");
  EXPECT_EQ(p.nodes[0].run_seconds, (std::vector<double>{900e-6, 100e-6, 120e-6}));
  EXPECT_EQ(p.nodes[0].output0_shape, (std::vector<int64_t>{1, 128}));
  EXPECT_EQ(p.nodes[1].name, "y");
  EXPECT_EQ(median_seconds(p.nodes[0].run_seconds), 120e-6);  // the slow first run left out
  EXPECT_EQ(median_seconds({4, 1, 3, 2}), 2.5);
}

TEST(OrtProfileTest, ProvidersGiveTheDeviceKindAndFileEqualsDeviceNamesTheAccelerator) {
  // A CUDA session with one node falling back to the CPU, as onnxruntime assigns Shape-like ops.
  const std::string path =
      write_temp("cuda.json", profile_text({{node_event("mm", 50, "CUDAExecutionProvider"),
                                             node_event("y", 7, "CPUExecutionProvider")}}));
  const OrtProfile by_kind = read_ort_profile({.path = path, .device = ""});
  EXPECT_EQ(by_kind.nodes[0].device, "gpu");
  EXPECT_EQ(by_kind.nodes[1].device, "cpu");
  const OrtProfile named = read_ort_profile({.path = path, .device = "/gpu:1"});
  EXPECT_EQ(named.nodes[0].device, "/gpu:1");
  EXPECT_EQ(named.nodes[1].device, "cpu");  // the CPU fallback stays on the CPU

  // A CPU-only profile gives all its times to the named device.
  const std::string cpu =
      write_temp("cpu.json", profile_text({{node_event("mm", 50, "CPUExecutionProvider")}}));
  EXPECT_EQ(read_ort_profile({.path = cpu, .device = "/cpu:0"}).nodes[0].device, "/cpu:0");

  // A provider whose device is not known needs the device named.
  const std::string ov =
      write_temp("ov.json", profile_text({{node_event("mm", 50, "OpenVINOExecutionProvider")}}));
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
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"mm_kernel_time","dur":-3}])"),
            bad + ": event 0 ('mm_kernel_time'): field 'dur': must be non-negative, got -3");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"mm_kernel_time","dur":"12"}])"),
            bad + ": event 0 ('mm_kernel_time'): field 'dur': expected a number");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"mm_kernel_time"}])"),
            bad + ": event 0 ('mm_kernel_time'): field 'dur': missing");
  EXPECT_EQ(error_for(R"([{"cat":"Node","name":"mm_kernel_time","dur":1e13,)"
                      R"("args":{"provider":"CPUExecutionProvider"}}])"),
            bad +
                ": event 0 ('mm_kernel_time'): field 'dur': 1e+13 microseconds is more than "
                "1e+06 s");
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

  OrtProfile read(const std::string& name, const std::string& text,
                  const std::string& device = "") {
    return read_ort_profile({.path = write_temp(name, text), .device = device});
  }
};

TEST_F(ApplyOrtProfileTest, MediansReplaceTheCostModelOnTheDeviceKind) {
  const OrtProfile cpu =
      read("cpu.json", profile_text({{node_event("mm", 300, "CPUExecutionProvider"),
                                      node_event("y", 8, "CPUExecutionProvider")},
                                     {node_event("mm", 200, "CPUExecutionProvider"),
                                      node_event("y", 6, "CPUExecutionProvider")},
                                     {node_event("mm", 250, "CPUExecutionProvider"),
                                      node_event("y", 9, "CPUExecutionProvider")}}));
  const MeasuredGraph m = apply_ort_profiles(graph_, {cpu});
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  const Op& mm = m.graph.op(*m.graph.find_op("mm"));
  EXPECT_EQ(time_on(mm, "cpu"), 250e-6);
  EXPECT_EQ(time_on(mm, "gpu"), 0.0012);   // the file's own times stay
  EXPECT_EQ(time_on(mm, "/cpu:0"), 0.02);  // and a device name still wins over the kind
  const Op& y = m.graph.op(*m.graph.find_op("y"));
  EXPECT_EQ(time_on(y, "cpu"), 8e-6);
  ASSERT_EQ(m.targets.size(), 1u);
  EXPECT_EQ(m.targets[0].device, "cpu");
  EXPECT_FALSE(m.targets[0].from_spec);

  // The cost table uses them: y on the CPU takes its median, not the roofline's estimate.
  const CostTable costs(m.graph, cluster_);
  EXPECT_EQ(costs.time_s(*m.graph.find_op("y"), DeviceId(0)), 8e-6);
  EXPECT_EQ(costs.time_s(*m.graph.find_op("mm"), DeviceId(0)), 0.02);
  // Everything else about the graph is unchanged.
  EXPECT_EQ(m.graph.num_ops(), graph_.num_ops());
  EXPECT_EQ(m.graph.num_edges(), graph_.num_edges());
  EXPECT_EQ(mm.flops, graph_.op(*graph_.find_op("mm")).flops);
}

TEST_F(ApplyOrtProfileTest, WarnsAboutWhatTheProfileDoesNotCover) {
  // One run, a node the graph lacks, mm at another batch size, and y not profiled on the GPU.
  const OrtProfile gpu =
      read("gpu.json", profile_text({{node_event("mm", 30, "CUDAExecutionProvider", "[8,128]"),
                                      node_event("Shape_3", 10, "CUDAExecutionProvider")}}));
  const std::string path = scratch_path("gpu.json");
  const MeasuredGraph m = apply_ort_profiles(graph_, {gpu});
  EXPECT_EQ(m.warnings,
            (std::vector<std::string>{
                path + ": 1 of its 2 profiled nodes (25.0% of their time) are no op of graph "
                       "'tiny': folded or aliased on import, fused by onnxruntime, or from another "
                       "model (first: 'Shape_3')",
                path + ": 1 forward ops with work have no time in it and keep the cost "
                       "model's estimates (first: 'y')",
                path + ": 1 nodes ran fewer than 3 times (first: 'mm'); onnxruntime's first run "
                       "includes one-time work, which the median of three or more runs leaves "
                       "out"}));
  EXPECT_EQ(time_on(m.graph.op(*m.graph.find_op("mm")), "gpu"), 30e-6);  // replaced the file's
}

TEST_F(ApplyOrtProfileTest, AShapeOtherThanTheGraphsSaysTheProfileRanAtOtherSizes) {
  // The ONNX importer keeps each op's output shapes; an imported graph written by `info -o` too.
  Graph shaped = read_graph_json(Json::parse(R"({"format": "dplace.graph/1", "name": "g", "ops": [
        {"name": "conv", "type": "Conv", "flops": 1e6, "output_bytes": 4096,
         "output_shapes": [[1, 8, 8, 16]]}]})"),
                                 "g.json");
  const OrtProfile p = read(
      "shape.json", profile_text({{node_event("conv", 5, "CPUExecutionProvider", "[4,8,8,16]")},
                                  {node_event("conv", 5, "CPUExecutionProvider", "[4,8,8,16]")},
                                  {node_event("conv", 5, "CPUExecutionProvider", "[4,8,8,16]")}}));
  const MeasuredGraph m = apply_ort_profiles(shaped, {p});
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_EQ(m.warnings[0], scratch_path("shape.json") +
                               ": 1 nodes' first output has another shape than the graph's (node "
                               "'conv': profiled [4,8,8,16], the graph's [1,8,8,16]); was the "
                               "profile run at other input sizes (--dim)?");
}

TEST_F(ApplyOrtProfileTest, AProfileOfAnotherModelOrTwoProfilesOfOneDeviceAreRefused) {
  const OrtProfile other =
      read("other.json", profile_text({{node_event("conv1", 30, "CPUExecutionProvider"),
                                        node_event("relu1", 3, "CPUExecutionProvider")}}));
  try {
    apply_ort_profiles(graph_, {other});
    FAIL() << "a profile of another model was applied";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              scratch_path("other.json") +
                  ": none of its 2 profiled nodes is an op of graph 'tiny' (first: 'conv1', "
                  "'relu1'); profile the same model, with onnxruntime's graph optimizations off "
                  "so that nodes keep their names");
  }
  const OrtProfile a = read("a.json", profile_text({{node_event("y", 3, "CPUExecutionProvider")}}));
  const OrtProfile b = read("b.json", profile_text({{node_event("y", 4, "CPUExecutionProvider")}}));
  try {
    apply_ort_profiles(graph_, {a, b});
    FAIL() << "two profiles timed one op on one device";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "--profile: op 'y' is timed on 'cpu' by both " +
                                         scratch_path("a.json") + " and " + scratch_path("b.json") +
                                         "; give each device one profile");
  }
  // A CPU profile and a GPU profile of one model go together.
  const OrtProfile g =
      read("g.json", profile_text({{node_event("y", 1, "CUDAExecutionProvider")}}));
  const MeasuredGraph m = apply_ort_profiles(graph_, {a, g});
  const Op& y = m.graph.op(*m.graph.find_op("y"));
  EXPECT_EQ(time_on(y, "cpu"), 3e-6);
  EXPECT_EQ(time_on(y, "gpu"), 1e-6);
}

TEST(OrtProfileSpecTest, FileEqualsDeviceSplitsAtTheLastEqualsUnlessTheFileExists) {
  EXPECT_EQ(parse_profile_spec("run.json").path, "run.json");
  EXPECT_EQ(parse_profile_spec("run.json").device, "");
  const ProfileSpec split = parse_profile_spec("a=b/run.json=/gpu:1");
  EXPECT_EQ(split.path, "a=b/run.json");
  EXPECT_EQ(split.device, "/gpu:1");
  const std::string odd = write_temp("batch=8.json", "[]");
  EXPECT_EQ(parse_profile_spec(odd).path, odd);
  EXPECT_EQ(parse_profile_spec(odd).device, "");
  EXPECT_THROW(parse_profile_spec("run.json="), ConfigError);
  EXPECT_THROW(parse_profile_spec("=gpu"), ConfigError);
}

}  // namespace
}  // namespace dplace
