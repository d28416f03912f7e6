// End-to-end tests of the dplace binary: exit codes, one-line errors, JSON output, determinism.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli_run.h"
#include "dplace/core/json.h"

namespace dplace {
namespace {

using namespace cli_testing;  // NOLINT: the helpers of cli_run.h
namespace fs = std::filesystem;

TEST(CliTest, ListsModelsClustersAndPlacers) {
  RunResult models = run("models --json");
  ASSERT_EQ(models.exit_code, 0) << models.err;
  EXPECT_NE(models.out.find("two_tower"), std::string::npos);
  RunResult clusters = run("clusters --json");
  ASSERT_EQ(clusters.exit_code, 0) << clusters.err;
  const Json j = Json::parse(clusters.out);
  bool found = false;
  for (const Json& c : j["clusters"]) found |= c["name"] == "paper-k80x4";
  EXPECT_TRUE(found);
  RunResult placers = run("placers");
  ASSERT_EQ(placers.exit_code, 0) << placers.err;
  EXPECT_NE(placers.out.find("single-gpu"), std::string::npos);
}

TEST(CliTest, InfoReportsGraphStatistics) {
  RunResult r = run("info " + data("cli/chain.json") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["ops"], 4);
  EXPECT_EQ(j["edges"], 3);
  EXPECT_EQ(j["groups"], 4);
  EXPECT_DOUBLE_EQ(j["total_flops"].get<double>(), 4.001e9);
  EXPECT_EQ(j["param_bytes"], 8000000);
  EXPECT_EQ(j["activation_bytes"], 4000000);
}

TEST(CliTest, InfoWritesTheGraphItReadsAndReadsItBack) {
  // An ONNX import and a built-in training graph, written as dplace.graph/1 and read back: the
  // same statistics, as the other commands will see them.
  const std::string onnx = data("onnx/resnet50.onnx") + " --dim batch=4";
  for (const std::string& graph : {onnx, std::string("rnnlm --layers 1 --seq 3 --training")}) {
    const std::string written = (temp_dir() / "written.json").string();
    RunResult first = run("info " + graph + " --json -o " + written);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    RunResult again = run("info " + written + " --json");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    Json a = Json::parse(first.out), b = Json::parse(again.out);
    EXPECT_EQ(b["format"], "dplace.graph/1");
    for (const char* field : {"graph", "ops", "edges", "groups", "total_flops", "forward_flops",
                              "param_bytes", "activation_bytes", "phases", "op_types"}) {
      EXPECT_EQ(a[field], b[field]) << graph << ": " << field;
    }
  }
  const std::string chain = data("cli/chain.json");
  RunResult same = run("info " + chain + " -o " + chain);
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_NE(same.err.find("GRAPH " + chain + " and -o " + chain + " are the same file"),
            std::string::npos)
      << same.err;
  // A hard link to the GRAPH file is the GRAPH file.
  const std::string copy = (temp_dir() / "chain_copy.json").string();
  const std::string link = (temp_dir() / "chain_link.json").string();
  std::filesystem::remove(copy);
  std::filesystem::remove(link);
  std::filesystem::copy_file(chain, copy);
  std::filesystem::create_hard_link(copy, link);
  RunResult linked = run("info " + copy + " -o " + link);
  EXPECT_EQ(linked.exit_code, 2);
  EXPECT_NE(linked.err.find("are the same file"), std::string::npos) << linked.err;
  RunResult nowhere = run("info rnnlm -o /nonexistent-dir/g.json");
  EXPECT_EQ(nowhere.exit_code, 2);
  EXPECT_NE(nowhere.err.find("/nonexistent-dir/g.json: cannot open file for writing"),
            std::string::npos)
      << nowhere.err;
}

// An onnxruntime profile as its profiler writes one: `runs` session runs of the given node
// events (node name, op type, microseconds, provider), each with its fence events and a model_run
// event.
std::string write_ort_profile(
    const std::string& name,
    const std::vector<std::tuple<std::string, std::string, int, std::string>>& nodes, int runs,
    const std::string& output_shape = "") {
  std::string text = R"([{"cat" : "Session","pid" :9,"tid" :9,"dur" :1000,"ts" :0,"ph" : "X",)"
                     R"("name" :"model_loading_uri","args" : {}})";
  int ts = 10;
  for (int run = 0; run < runs; ++run) {
    for (const auto& [node, type, micros, provider] : nodes) {
      const std::string head = R"({"cat" : "Node","pid" :9,"tid" :9,"dur" :)";
      text += ",\n" + head + "1,\"ts\" :" + std::to_string(ts++) + R"(,"ph" : "X","name" :")" +
              node + R"(_fence_before","args" : {"op_name" : ")" + type + "\"}}";
      text +=
          ",\n" + head + std::to_string(micros) + ",\"ts\" :" + std::to_string(ts++) +
          R"(,"ph" : "X","name" :")" + node + R"(_kernel_time","args" : {"op_name" : ")" + type +
          "\"," + R"("provider" : ")" + provider + "\"" +
          (output_shape.empty() ? ""
                                : R"(,"output_type_shape" : [{"float":)" + output_shape + "}]") +
          "}}";
    }
    text += R"(,{"cat" : "Session","pid" :9,"tid" :9,"dur" :900,"ts" :9,"ph" : "X",)"
            R"("name" :"model_run","args" : {}})";
  }
  const std::string path = (temp_dir() / name).string();
  std::ofstream(path, std::ios::trunc) << text << "]\n";
  return path;
}

TEST(CliTest, OnnxruntimeProfileTimesReplaceTheCostModel) {
  // SimulateGivesHandComputedStepTime's chain with measured times: a and b on the GPU (CUDA),
  // y on the CPU, medians of three runs. Step = x 1e-4 + x->a 1e-3 + a 5e-4 + b 7e-4 + b->y 1e-3
  // + y 5e-5 = 3.35e-3 s (6.3e-3 s with the cost model's estimates).
  const std::string profile = write_ort_profile("chain_cuda.json",
                                                {{"a", "MatMul", 500, "CUDAExecutionProvider"},
                                                 {"b", "MatMul", 700, "CUDAExecutionProvider"},
                                                 {"y", "Relu", 50, "CPUExecutionProvider"}},
                                                3);
  const std::string common = data("cli/chain.json") + " --cluster " + data("cli/two_devices.json") +
                             " --placement " + data("cli/split.placement.json") +
                             " --json --profile " + profile;
  RunResult r = run("simulate " + common);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NEAR(Json::parse(r.out)["step_time_s"].get<double>(), 3.35e-3, 1e-15);

  // FILE=DEVICE: the times go to that device, which the cluster must have.
  RunResult named = run("simulate " + common + "=/gpu:0");
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_NEAR(Json::parse(named.out)["step_time_s"].get<double>(), 3.35e-3, 1e-15);
  expect_one_line_error(run("simulate " + common + "=/gpu:7"),
                        "--profile " + profile +
                            "=/gpu:7: cluster 'two-devices' has no device or device kind '/gpu:7'");
  // A kind the cluster lacks is only a warning: those times are not used.
  RunResult cpu_only = run("place " + data("cli/chain.json") +
                           " --cluster cpu-only --placer single-cpu --profile " + profile);
  ASSERT_EQ(cpu_only.exit_code, 0) << cpu_only.err;
  EXPECT_NE(
      cpu_only.err.find("graph 'chain': 2 ops have measured times only for 'gpu', which "
                        "cluster 'cpu-only' lacks; the cost model's estimates are used there"),
      std::string::npos)
      << cpu_only.err;

  // info counts the measured ops and writes them as time_s.
  const std::string written = (temp_dir() / "measured.json").string();
  RunResult info =
      run("info " + data("cli/chain.json") + " --json --profile " + profile + " -o " + written);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(Json::parse(info.out)["measured_ops"], Json::parse(R"({"cpu": 1, "gpu": 2})"));
  const Json graph = Json::parse(read_all(written));
  EXPECT_EQ(graph["ops"][1]["time_s"], Json::parse(R"({"gpu": 5e-4})"));

  // Bad profiles are one-line errors naming the file.
  expect_one_line_error(
      run("info " + data("cli/chain.json") + " --profile " + data("cli/chain.json")),
      data("cli/chain.json") + ": not an onnxruntime profile");
  expect_one_line_error(run("info " + data("cli/chain.json") + " --profile /nonexistent.json"),
                        "/nonexistent.json");
  const std::string other =
      write_ort_profile("other.json", {{"conv1", "Conv", 9, "CPUExecutionProvider"}}, 3);
  expect_one_line_error(run("info " + data("cli/chain.json") + " --profile " + other),
                        "none of its 1 profiled node names an op of graph 'chain'");
}

TEST(CliTest, OnnxruntimeProfilesCombineAcrossDevicesAndCommands) {
  const std::string chain = data("cli/chain.json");
  const std::string cluster = " --cluster " + data("cli/two_devices.json");
  const std::string cuda = write_ort_profile("cuda.json",
                                             {{"a", "MatMul", 500, "CUDAExecutionProvider"},
                                              {"b", "MatMul", 700, "CUDAExecutionProvider"},
                                              {"y", "Relu", 50, "CPUExecutionProvider"}},
                                             3);
  // A CPU-only profile named for a device gives it all its times.
  const std::string cpu = write_ort_profile(
      "cpu.json",
      {{"a", "MatMul", 9000, "CPUExecutionProvider"}, {"y", "Relu", 30, "CPUExecutionProvider"}},
      3);
  RunResult both =
      run("simulate " + chain + cluster + " --placement " + data("cli/split.placement.json") +
          " --json --profile " + cuda + " --profile " + cpu + "=/cpu:0");
  ASSERT_EQ(both.exit_code, 0) << both.err;
  // y: 30 us on /cpu:0 by name, which wins over the CUDA profile's CPU fallback (50 us, kind).
  EXPECT_NEAR(Json::parse(both.out)["step_time_s"].get<double>(), 3.33e-3, 1e-15);
  // One profile timing a kind and another a device of that kind, for one op: refused.
  const std::string cuda_named = cuda + "=/gpu:0";
  expect_one_line_error(
      run("simulate " + chain + cluster + " --placement " + data("cli/split.placement.json") +
          " --profile " + cuda + " --profile " +
          write_ort_profile("gpu0.json", {{"a", "MatMul", 1, "CUDAExecutionProvider"}}, 3) +
          "=/gpu:0"),
      "--profile: op 'a' is timed on '/gpu:0' by ");
  // compare and pipeline take profiles too.
  RunResult compared =
      run("compare " + chain + cluster + " --placers single-gpu,heft --json --profile " + cuda);
  ASSERT_EQ(compared.exit_code, 0) << compared.err;
  EXPECT_EQ(Json::parse(compared.out)["rows"].size(), 2u);
  RunResult piped = run("pipeline " + chain + cluster + " --profile " + cuda);
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  // A graph file's time for a device name wins over a profile's for its kind: said when the
  // cluster shows the device is of that kind (tiny_graph times mm on /cpu:0 and on kind gpu).
  const std::string tiny_cpu = write_ort_profile(
      "tiny_cpu.json",
      {{"mm", "MatMul", 300, "CPUExecutionProvider"}, {"y", "Relu", 8, "CPUExecutionProvider"}}, 3);
  const std::string tiny = data("io/tiny_graph.json") + " --cluster " +
                           data("io/tiny_cluster.json") + " --placement " +
                           data("io/tiny_placement.json");
  RunResult shadowed = run("simulate " + tiny + " --profile " + tiny_cpu);
  ASSERT_EQ(shadowed.exit_code, 0) << shadowed.err;
  EXPECT_NE(shadowed.err.find(
                tiny_cpu + ": 1 op also has times in the graph for a device of the kind it times "
                           "(op 'mm' on '/cpu:0'), which win over the profile's on that device"),
            std::string::npos)
      << shadowed.err;
  const std::string tiny_gpu =
      write_ort_profile("tiny_gpu.json", {{"mm", "MatMul", 30, "CUDAExecutionProvider"}}, 3);
  RunResult other_kind = run("simulate " + tiny + " --profile " + tiny_gpu);
  ASSERT_EQ(other_kind.exit_code, 0) << other_kind.err;
  EXPECT_EQ(other_kind.err.find("which win over"), std::string::npos) << other_kind.err;
  // A warning quoting a hostile name stays one line.
  const std::string odd = write_ort_profile("odd.json",
                                            {{"a", "MatMul", 5, "CPUExecutionProvider"},
                                             {"new\\nline", "Relu", 5, "CPUExecutionProvider"}},
                                            3);
  RunResult warned = run("info " + chain + " --profile " + odd);
  ASSERT_EQ(warned.exit_code, 0) << warned.err;
  EXPECT_NE(warned.err.find("(first: 'new\\x0aline')"), std::string::npos) << warned.err;
  for (size_t at = 0; at < warned.err.size(); at = warned.err.find('\n', at) + 1) {
    EXPECT_EQ(warned.err.compare(at, 17, "dplace: warning: "), 0) << warned.err;
  }
}

TEST(CliTest, OnnxruntimeProfileOfAnOnnxModelMatchesNodeNames) {
  // op_mix.onnx's nodes by the names onnxruntime gives them; "/Shape" is a node dplace folds.
  const std::string profile = write_ort_profile(
      "op_mix_cpu.json",
      {{"/up/ConvTranspose", "ConvTranspose", 40, "CPUExecutionProvider"},
       {"/bn/BatchNormalization", "BatchNormalization", 12, "CPUExecutionProvider"},
       {"/gru/GRU", "GRU", 300, "CPUExecutionProvider"},
       {"/Shape", "Shape", 1, "CPUExecutionProvider"}},
      5);
  RunResult r = run("info " + data("onnx/op_mix.onnx") + " --json --profile " + profile);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["measured_ops"], Json::parse(R"({"cpu": 3})"));
  EXPECT_NE(r.err.find(profile + ": 1 of its 4 profiled nodes (0.3% of their time) names no op of "
                                 "graph 'op_mix'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--profile: 14 forward ops with work have no measured time"),
            std::string::npos)
      << r.err;
}

// post learns within its budget without LibTorch, polishes its result, takes the run controls
// it shares with rl (--samples, --curve) and refuses rl's others in one line.
TEST(CliTest, PostPlacesWithTheRunControlsItShares) {
  const fs::path curve = temp_dir() / "post_curve.csv";
  const RunResult r =
      run("place two_tower --cluster paper-k80x2 --placer post --json --samples 320 "
          "--curve " +
          curve.string() + " --param polish=200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json doc = Json::parse(r.out);
  EXPECT_TRUE(doc["feasible"].get<bool>());
  const std::string note = doc["note"];
  EXPECT_NE(note.find("post: 320 samples"), std::string::npos) << note;
  EXPECT_NE(note.find("polished by anneal: learned "), std::string::npos) << note;
  // A header and one row per batch of 16.
  const std::string rows = read_all(curve);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 1 + 320 / 16);
  expect_one_line_error(run("place two_tower --cluster paper-k80x2 --placer post --checkpoint x"),
                        "placer 'post': unknown --param 'checkpoint'");
  expect_one_line_error(run("place two_tower --cluster paper-k80x2 --placer post --param mix=2"),
                        "placer 'post': --param mix=2 is outside [0, 1]");
#ifdef DPLACE_WITH_TORCH
  // Both learning placers write a curve: one plain file for both would be overwritten.
  expect_one_line_error(run("compare two_tower --cluster paper-k80x2 --placers rl,post "
                            "--param curve=" +
                            curve.string()),
                        "--param curve=" + curve.string() + " goes to both rl and post");
#endif
}

TEST(CliTest, HsdagPlacesWithTheRunControlsItShares) {
  const fs::path curve = temp_dir() / "hsdag_curve.csv";
  const RunResult r =
      run("place two_tower --inference --cluster cpu+igpu --placer hsdag --json --samples 320 "
          "--curve " +
          curve.string() + " --param polish=200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json doc = Json::parse(r.out);
  EXPECT_TRUE(doc["feasible"].get<bool>());
  const std::string note = doc["note"];
  EXPECT_NE(note.find("hsdag: 320 samples"), std::string::npos) << note;
  EXPECT_NE(note.find("polished by anneal: learned "), std::string::npos) << note;
  // A header and one row per update of 16 samples.
  const std::string rows = read_all(curve);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 1 + 320 / 16);
  expect_one_line_error(run("place two_tower --cluster paper-k80x2 --placer hsdag --checkpoint x"),
                        "placer 'hsdag': unknown --param 'checkpoint'");
  expect_one_line_error(run("place two_tower --cluster paper-k80x2 --placer hsdag --param parse=2"),
                        "parse");
  // An empty file name is the placer's own error, for every learning placer (it was "dplace: :
  // Invalid argument" from the check that outputs are distinct files).
  for (const std::string placer : {"post", "hsdag", "hierarchical"}) {
    expect_one_line_error(
        run("place two_tower --cluster paper-k80x2 --placer " + placer + " --param curve="),
        "placer '" + placer + "': --param curve= needs a file name");
  }
  // post and hsdag both write a curve: one plain file for both would be overwritten.
  expect_one_line_error(run("compare two_tower --cluster paper-k80x2 --placers post,hsdag "
                            "--param curve=" +
                            curve.string()),
                        "--param curve=" + curve.string() + " goes to both post and hsdag");
}

// The hierarchical planner takes the shared run controls; the groups option sets its grouper's
// group count.
TEST(CliTest, HierarchicalPlacesWithTheRunControlsItShares) {
  const fs::path curve = temp_dir() / "hierarchical_curve.csv";
  const RunResult r =
      run("place two_tower --inference --cluster cpu+igpu --placer hierarchical --json --samples "
          "64 --groups 6 --curve " +
          curve.string() + " --param polish=200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json doc = Json::parse(r.out);
  EXPECT_TRUE(doc["feasible"].get<bool>());
  const std::string note = doc["note"];
  EXPECT_NE(note.find("hierarchical: 64 samples"), std::string::npos) << note;
  EXPECT_NE(note.find("in 6 groups"), std::string::npos) << note;
  EXPECT_NE(note.find("polished by anneal: learned "), std::string::npos) << note;
  const std::string rows = read_all(curve);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 1 + 64 / 16);
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer hierarchical --param hidden=5"),
      "placer 'hierarchical': --param hidden=5 must be even");
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer hierarchical --checkpoint x"),
      "placer 'hierarchical': unknown --param 'checkpoint'");
}

TEST(CliTest, OnnxModelLocalFunctionsAreInlinedAndCounted) {
  // local_functions.onnx (scripts/make-function-fixture.py): two calls of mlp.Block, each calling
  // mlp.Linear twice, then a Softmax.
  RunResult r = run("info " + data("onnx/local_functions.onnx") + " --dim batch=32 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["ops"], 14);  // x, 2 x (2 x (MatMul, Add) + LeakyRelu + Add), Softmax
  EXPECT_EQ(j["function_ops"], Json::parse(R"({"mlp.Block": 4, "mlp.Linear": 8})"));
  // Four products of 32 x 64 x 256 multiply-adds (4 x 1,048,576 flops), bias Adds 2 x (32 x 256
  // + 32 x 64), LeakyRelus 2 x 32 x 256, residual Adds 2 x 32 x 64, Softmax 5 x 32 x 64.
  EXPECT_DOUBLE_EQ(j["forward_flops"].get<double>(),
                   4 * 1048576.0 + 2 * (8192 + 2048) + 2 * 8192 + 2 * 2048 + 5 * 2048);
  RunResult text = run("info " + data("onnx/local_functions.onnx") + " --dim batch=32");
  EXPECT_NE(text.out.find("inlined          12 ops from 2 ONNX functions: 8 mlp.Linear, 4 "
                          "mlp.Block\n"),
            std::string::npos)
      << text.out;
}

TEST(CliTest, SimulateGivesHandComputedStepTime) {
  // x on cpu: no work -> 0 (Input with no flops; bytes_accessed = 1 MB output -> 1e6/1e10 = 1e-4
  // s). x -> a crosses cpu->gpu: 1e6 B / 1e9 B/s = 1e-3 s. a, b on gpu: max(2e9/1e12, 2e6/1e11) =
  // 2e-3 s each. b -> y crosses gpu->cpu: 1e-3 s. y on cpu: max(1e6/1e11, 2e6/1e10) = 2e-4 s. Step
  // = 1e-4 + 1e-3 + 2e-3 + 2e-3 + 1e-3 + 2e-4 = 6.3e-3 s.
  RunResult r =
      run("simulate " + data("cli/chain.json") + " --cluster " + data("cli/two_devices.json") +
          " --placement " + data("cli/split.placement.json") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_NEAR(j["step_time_s"].get<double>(), 6.3e-3, 1e-12);
  EXPECT_EQ(j["feasible"], true);
  EXPECT_EQ(j["graph"], "chain");
  EXPECT_EQ(j["cluster"], "two-devices");
  EXPECT_TRUE(j.contains("lower_bound_s"));
  EXPECT_TRUE(j.contains("placement_seconds"));
  EXPECT_TRUE(j.contains("evaluations"));
  EXPECT_EQ(j["peak_memory_bytes"]["/gpu:0"].get<int64_t>() >= 8000000, true);
}

TEST(CliTest, PlaceWritesAPlacementThatSimulatesIdentically) {
  const std::string out = (temp_dir() / "p.json").string();
  const std::string trace = (temp_dir() / "t.json").string();
  const std::string dot = (temp_dir() / "g.dot").string();
  RunResult placed = run("place two_tower --cluster paper-k80x2 --placer single-gpu --json -o " +
                         out + " --trace " + trace + " --dot " + dot);
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  RunResult simulated =
      run("simulate two_tower --cluster paper-k80x2 --placement " + out + " --json");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_EQ(Json::parse(placed.out)["step_time_s"], Json::parse(simulated.out)["step_time_s"]);
  const Json t = Json::parse(read_all(trace));
  EXPECT_TRUE(t.contains("traceEvents"));
  EXPECT_NE(read_all(dot).find("digraph"), std::string::npos);
}

TEST(CliTest, CompareWritesTheBestPlacement) {
  // -o was documented for compare but refused by the option parser.
  const std::string out = (temp_dir() / "best.placement.json").string();
  const RunResult compared = run(
      "compare two_tower --cluster paper-k80x2 --placers single-gpu,heft,expert --json -o " + out);
  ASSERT_EQ(compared.exit_code, 0) << compared.err;
  const Json c = Json::parse(compared.out);
  double best_s = 0;
  for (const Json& row : c["rows"]) {
    if (row["placer"] == c["best"]) best_s = row["step_time_s"].get<double>();
  }
  ASSERT_GT(best_s, 0);
  const RunResult simulated =
      run("simulate two_tower --cluster paper-k80x2 --placement " + out + " --json");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_EQ(Json::parse(simulated.out)["step_time_s"].get<double>(), best_s);
}

TEST(CliTest, SameInputsGiveBitIdenticalResults) {
  RunResult a = run("compare two_tower --cluster paper-k80x4 --json");
  RunResult b = run("compare two_tower --cluster paper-k80x4 --json");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  Json ja = Json::parse(a.out), jb = Json::parse(b.out);
  for (Json* j : {&ja, &jb}) {
    for (Json& row : (*j)["rows"]) row.erase("placement_seconds");
  }
  EXPECT_EQ(ja.dump(), jb.dump());
}

TEST(CliTest, MissingFileIsOneLineExit2) {
  expect_one_line_error(run("info /nonexistent/graph.json"), "/nonexistent/graph.json");
}

TEST(CliTest, DirectoryGivenForAFileIsNamedAsOne) {
  // An ifstream opens a directory and reads nothing, so these used to say "empty file".
  const std::string dir = temp_dir().string();
  const std::string expected = dir + ": is a directory, not a file";
  expect_one_line_error(run("info " + dir), expected);
  expect_one_line_error(run("place two_tower --cluster " + dir + " --placer expert"), expected);
  expect_one_line_error(run("simulate two_tower --cluster paper-k80x2 --placement " + dir),
                        expected);
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer expert --placement " + dir), expected);
}

TEST(CliTest, UnknownPresetIsOneLineExit2) {
  expect_one_line_error(run("place two_tower --cluster nosuch --placer single-gpu"), "nosuch");
}

TEST(CliTest, UnknownPlacerIsOneLineExit2) {
  expect_one_line_error(run("place two_tower --cluster paper-k80x2 --placer nosuch"), "nosuch");
}

TEST(CliTest, UsageErrorIsOneLineExit2) {
  expect_one_line_error(run("simulate two_tower --cluster paper-k80x2"), "--placement");
  expect_one_line_error(run("frobnicate"), "frobnicate");
}

TEST(CliTest, NonFiniteOrHugeTimeLimitIsOneLineExit2) {
  // NaN compares false with everything, so a plain `<= 0` check let it through (and the search
  // then never stopped). --time-limit accepted inf and 1e300 and ran for ever; a finite 1e300
  // overflowed the steady clock when turned into a deadline.
  for (const char* seconds : {"nan", "inf", "-1", "0", "1e300", "1000001"}) {
    expect_one_line_error(run(std::string("place two_tower --cluster paper-k80x2 --placer anneal "
                                          "--budget-seconds ") +
                              seconds),
                          "--budget-seconds");
    expect_one_line_error(
        run(std::string("pipeline two_tower --cluster paper-k80x2 --time-limit ") + seconds),
        "--time-limit");
  }
  expect_one_line_error(run("pipeline two_tower --cluster paper-k80x2 --time-limit inf"),
                        "--time-limit inf: expected a number of seconds in (0, 1000000]");
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer anneal --budget-seconds 1e300"),
      "--budget-seconds 1e+300: expected a number of seconds in (0, 1000000]");
  // compare ran every placer with the bad value, printed each one's error as its row and exited 0.
  expect_one_line_error(run("compare two_tower --cluster paper-k80x2 --budget-seconds 0"),
                        "--budget-seconds 0: expected a number of seconds in (0, 1000000]");
  // Hexadecimal was read as seconds ("0x10" as 16 s).
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer anneal --budget-seconds 0x10"),
      "--budget-seconds '0x10': expected a number of seconds in (0, 1000000], in decimal");
  expect_one_line_error(run("pipeline two_tower --cluster paper-k80x2 --time-limit 0x10"),
                        "--time-limit '0x10': expected a number of seconds");
}

TEST(CliTest, OptionsThePlacerDoesNotReadAreRefused) {
  // Every placer refuses a --param key it does not know, the fixed placements included (they used
  // to ignore them, so --groups or a typo went unnoticed).
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer single-gpu --param zzz=1"),
      "placer 'single-gpu': unknown --param 'zzz'");
  expect_one_line_error(run("place two_tower --cluster paper-k80x2 --placer single:/gpu:1 "
                            "--groups 4"),
                        "placer 'single:/gpu:1': unknown --param 'groups'");
  expect_one_line_error(run("place rnnlm --cluster paper-k80x2 --placer expert --samples 4"),
                        "placer 'expert': unknown --param 'samples'");
  // A scoped key goes to its placer only, so compare can pass rl's options alongside others.
  const RunResult scoped =
      run("compare two_tower --cluster paper-k80x2 --placers single-gpu,anneal --json "
          "--param anneal.evaluations=50");
  ASSERT_EQ(scoped.exit_code, 0) << scoped.err;
  const Json scoped_doc = Json::parse(scoped.out);  // a temporary would die before the loop body
  for (const Json& row : scoped_doc.at("rows")) {
    EXPECT_FALSE(row.contains("error")) << row.dump();
    if (row["placer"] == "anneal") {
      // Two searches of 50 moves and the start candidates, not the default 2 x 20,000.
      EXPECT_LE(row["evaluations"].get<int64_t>(), 200);
    }
  }
  expect_one_line_error(
      run("compare two_tower --cluster paper-k80x2 --placers heft --param rl.samples=64"),
      "--param rl.samples=64: 'rl' is not a placer of this run");
  // --placement is read by expert, anneal and rl only.
  const fs::path p = temp_dir() / "expert_rnnlm.json";
  ASSERT_EQ(
      run("place rnnlm --seq 2 --cluster paper-k80x2 --placer expert -o " + p.string()).exit_code,
      0);
  expect_one_line_error(
      run("place rnnlm --seq 2 --cluster paper-k80x2 --placer heft --placement " + p.string()),
      "placer 'heft' does not read a placement");
  EXPECT_EQ(
      run("place rnnlm --seq 2 --cluster paper-k80x2 --placer expert --placement " + p.string())
          .exit_code,
      0);
  // --latency-method belongs to the latency objective.
  expect_one_line_error(run("pipeline two_tower --cluster paper-k80x2 --latency-method greedy"),
                        "--latency-method applies to --objective latency only");
}

TEST(CliTest, TrainingOnATrainingGraphNamesTheFile) {
  const fs::path graph = temp_dir() / "trained.json";
  std::ofstream(graph) << R"({"format": "dplace.graph/1", "name": "trained", "ops": [
      {"name": "a", "type": "MatMul", "flops": 1e9, "output_bytes": 1000, "param_bytes": 64},
      {"name": "grad/a", "type": "MatMul", "inputs": ["a"], "flops": 1e9, "output_bytes": 64,
       "phase": "backward"}]})";
  expect_one_line_error(run("info " + graph.string() + " --training"),
                        graph.string() +
                            ": --training: graph 'trained': op 'grad/a' already has phase "
                            "'backward'; the graph is a training graph already");
}

TEST(CliTest, ImportOptionsAFileCannotUseAreNotIgnoredSilently) {
  const std::string bert = data(
      "workloads/msr-dnn-partitioning/latency-inputs/OperatorGraphs/"
      "bert_l-3_inference.json");
  // A dnn-partitioning file fixes its phases; both flags used to be dropped without a word.
  for (const char* flag : {"--training", "--inference"}) {
    expect_one_line_error(run("info " + bert + " " + flag),
                          bert +
                              ": --training/--inference do not apply to a dnn-partitioning "
                              "workload");
  }
  // --inference on a file holding a training graph would have placed the whole step.
  const fs::path trained = temp_dir() / "trained_for_inference.json";
  std::ofstream(trained) << R"({"format": "dplace.graph/1", "name": "trained", "ops": [
      {"name": "a", "type": "MatMul", "flops": 1e9, "output_bytes": 1000, "param_bytes": 64},
      {"name": "grad/a", "type": "MatMul", "inputs": ["a"], "flops": 1e9, "output_bytes": 64,
       "phase": "backward"}]})";
  expect_one_line_error(run("info " + trained.string() + " --inference"),
                        trained.string() +
                            ": --inference: graph 'trained': op 'grad/a' has "
                            "phase 'backward'; the file holds a training graph");
  // --dim on a file without symbolic dimensions is a warning, as on a PipeDream profile.
  const RunResult dim_on_json = run("info " + data("cli/chain.json") + " --dim batch=2");
  EXPECT_EQ(dim_on_json.exit_code, 0) << dim_on_json.err;
  EXPECT_NE(dim_on_json.err.find("--dim has no effect on a dplace.graph/1 graph"),
            std::string::npos)
      << dim_on_json.err;
  const RunResult dim_on_dnn = run("info " + bert + " --dim batch=2");
  EXPECT_EQ(dim_on_dnn.exit_code, 0) << dim_on_dnn.err;
  EXPECT_NE(dim_on_dnn.err.find("--dim has no effect on a dnn-partitioning workload"),
            std::string::npos)
      << dim_on_dnn.err;
  // A dimension given twice used to keep the last value.
  expect_one_line_error(run("info " + data("onnx/resnet50.onnx") + " --dim batch=2 --dim batch=3"),
                        "--dim 'batch=3': dimension 'batch' is already set to 2");
}

TEST(CliTest, InputWarningsWaitUntilTheInputsAreChecked) {
  // bert24_training gives two tensors two sizes: a warning, which used to be printed before the
  // error of a bad placement, so the failure was two lines.
  const std::string bert = data(
      "workloads/msr-dnn-partitioning/throughput-inputs/LayerGraphs/"
      "bert24_training.json");
  const fs::path empty = temp_dir() / "empty_assignment.json";
  std::ofstream(empty) << R"({"format": "dplace.placement/1", "assignment": {}})";
  expect_one_line_error(run("simulate " + bert + " --placement " + empty.string()),
                        "and 63 more of the 64 ops have no device");
  // On success the warning is still printed.
  const RunResult info = run("info " + bert);
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.err.find("dplace: warning: " + bert + ": 2 out-edges give their source"),
            std::string::npos)
      << info.err;
}

TEST(CliTest, OpTheClusterCannotRunNamesTheGraphFile) {
  const fs::path graph = temp_dir() / "accel_only.json";
  std::ofstream(graph) << R"({"format": "dplace.graph/1", "name": "g", "ops": [
      {"name": "x", "devices": "accel"}]})";
  expect_one_line_error(run("place " + graph.string() + " --cluster paper-k80x2 --placer heft"),
                        graph.string() +
                            ": graph 'g': op 'x': no device of cluster 'paper-k80x2' is allowed "
                            "(devices: accel)");
}

TEST(CliTest, RatioToAZeroLowerBoundIsNotAvailable) {
  // Ops that take no time give a lower bound of 0; a step spent on a transfer is then no ratio
  // of it (it used to print 0.000, as if the placement beat the bound).
  const fs::path graph = temp_dir() / "time_zero.json";
  std::ofstream(graph) << R"({"format": "dplace.graph/1", "name": "tz", "ops": [
      {"name": "a", "flops": 1e12, "time_s": {"gpu": 0, "cpu": 0}, "output_bytes": 1000},
      {"name": "b", "inputs": ["a"], "flops": 1e12, "time_s": {"gpu": 0, "cpu": 0}}]})";
  const fs::path split = temp_dir() / "tz_split.json";
  std::ofstream(split) << R"({"format": "dplace.placement/1",
      "assignment": {"a": "/gpu:0", "b": "/gpu:1"}})";
  const std::string args = "simulate " + graph.string() + " --cluster paper-k80x2 --placement ";
  const RunResult text = run(args + split.string());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("lower bound 0 us   ratio n/a"), std::string::npos) << text.out;
  const RunResult json = run(args + split.string() + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json j = Json::parse(json.out);
  EXPECT_GT(j["step_time_s"].get<double>(), 0);
  EXPECT_TRUE(j["ratio_to_lower_bound"].is_null()) << json.out;
  // Both on one GPU: no transfer, a step of 0 at a bound of 0 is a ratio of 1.
  const RunResult together =
      run("place " + graph.string() + " --cluster paper-k80x2 --placer single-gpu --json");
  ASSERT_EQ(together.exit_code, 0) << together.err;
  EXPECT_EQ(Json::parse(together.out)["ratio_to_lower_bound"].get<double>(), 1.0);
  const RunResult csv =
      run("compare " + graph.string() + " --cluster paper-k80x2 --placers round-robin --csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.out.find("\nround-robin,1.01e-05,1,,1000,,"), std::string::npos) << csv.out;
}

TEST(CliTest, PipelineSplitAcrossUnlinkedDevicesIsOneLineWhenWritten) {
  // The solver takes transfers between unlinked devices as free, so it may split across them; the
  // split is then reported with warnings, but writing it is an error of one line (the warnings
  // used to come first).
  const fs::path cluster = temp_dir() / "unlinked.json";
  std::ofstream(cluster) << R"({"format": "dplace.cluster/1", "name": "unlinked", "devices": [
      {"name": "/gpu:0", "kind": "gpu", "peak_flops": 1e13, "mem_bandwidth_bytes_per_s": 1e11,
       "memory_bytes": 1.2e10},
      {"name": "/gpu:1", "kind": "gpu", "peak_flops": 1e13, "mem_bandwidth_bytes_per_s": 1e11,
       "memory_bytes": 1.2e10}]})";
  const std::string command = "pipeline two_tower --inference --cluster " + cluster.string();
  const RunResult shown = run(command);
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.err.find("the split is not simulated"), std::string::npos) << shown.err;
  const fs::path out = temp_dir() / "unlinked_split.json";
  expect_one_line_error(run(command + " -o " + out.string()),
                        "cluster 'unlinked': the split cannot be written");
}

// A latency program stopped at its limit: whichever way CBC stops (at the limit with the greedy
// hot start as its incumbent, or past it inside an LP solve), a result that is the greedy split
// says so, and gives the gap. ("CBC stopped at its 1 s limit; gap 55.04%" read as CBC's own.)
TEST(CliTest, LatencyProgramCutByItsLimitSaysWhenTheSplitIsTheGreedyOne) {
  const std::string command =
      "pipeline inception_v3 --cluster paper-k80x2 --objective latency --json --latency-method ";
  const RunResult greedy = run(command + "greedy");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  const RunResult ilp = run(command + "ilp --time-limit 1");
  ASSERT_EQ(ilp.exit_code, 0) << ilp.err;
  const Json g = Json::parse(greedy.out), j = Json::parse(ilp.out);
  ASSERT_FALSE(j["optimal"].get<bool>())
      << "this input is now solved within 1 s: pick a larger one";
  const std::string note = j["note"].get<std::string>();
  EXPECT_NE(note.find("gap "), std::string::npos) << note;
  if (j["latency"].get<double>() == g["latency"].get<double>()) {
    EXPECT_NE(note.find("greedy split"), std::string::npos) << note;
  }
}

TEST(CliTest, PipelineSeedChoosesTheLocalSearchAndTheSameSeedTheSameSplit) {
  // A small unrolled NMT still has millions of ideals, so the DP falls back to the chain split
  // and the seeded local search (placers/pipeline/refine.h) improves it, or not, by seed.
  const std::string command =
      "pipeline nmt --seq 6 --hidden 256 --vocab 1000 --batch 16 --cluster paper-k80x4 "
      "--contiguous";
  const fs::path a = temp_dir() / "seed1_a.json", b = temp_dir() / "seed1_b.json",
                 c = temp_dir() / "seed2.json";
  const RunResult first = run(command + " --seed 1 -o " + a.string());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("local search improved it from 4.0645 to 3.7836 ms"), std::string::npos)
      << first.out;
  ASSERT_EQ(run(command + " --seed 1 -o " + b.string()).exit_code, 0);
  EXPECT_EQ(read_all(a), read_all(b));
  const RunResult other = run(command + " --seed 2 -o " + c.string());
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(read_all(a), read_all(c));
  EXPECT_EQ(other.out.find("local search improved"), std::string::npos) << other.out;
}

// The plan counts weights and temporaries against memory, the simulated training step also the
// activations it keeps: a plan that fits can run out of memory as a step, and the line that
// reports the step says so (it gave the step time alone, while --json's oom_devices listed it).
TEST(CliTest, PipelineSaysWhenItsSimulatedStepRunsOutOfMemory) {
  const std::string command =
      "pipeline gpt2 --batch 48 --layers 1 --cluster paper-k80x2 --contiguous";
  const RunResult text = run(command);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("simulated without pipelining: 4.296 s, out of memory on /gpu:1\n"),
            std::string::npos)
      << text.out;
  const RunResult json = run(command + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json j = Json::parse(json.out);
  EXPECT_TRUE(j["feasible"].get<bool>());
  EXPECT_FALSE(j["simulation"]["feasible"].get<bool>());
  EXPECT_EQ(j["oom_devices"].size(), 1u);
  const RunResult fits =
      run("pipeline gpt2 --batch 16 --layers 1 --cluster paper-k80x2 --contiguous");
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.out.find("out of memory"), std::string::npos) << fits.out;
}

// Two outputs naming one file: the later write replaced the earlier (a curve lost to the
// checkpoint, a placement to the trace) and the run said nothing.
TEST(CliTest, TwoOutputsNamingOneFileAreRefused) {
  const std::string dir = temp_dir().string();
  expect_one_line_error(run("place two_tower --cluster paper-k80x2 --placer heft -o " + dir +
                            "/a.json --trace " + dir + "/./a.json"),
                        "-o " + dir + "/a.json and --trace " + dir +
                            "/./a.json are the same file: one would overwrite the other");
#ifdef DPLACE_WITH_TORCH
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer rl --param checkpoint=" + dir +
          "/same.x --curve " + dir + "/same.x"),
      "--param curve=" + dir + "/same.x and --param checkpoint=" + dir +
          "/same.x are the same file");
  expect_one_line_error(run("compare two_tower --cluster paper-k80x2 --placers rl -o " + dir +
                            "/c.json --param rl.curve=" + dir + "/c.json"),
                        "-o " + dir + "/c.json and --param rl.curve=" + dir + "/c.json");
  // A scoped key overrides the plain one: no clash when rl writes its curve elsewhere.
  const RunResult apart =
      run("place two_tower --cluster paper-k80x2 --placer rl --samples 8 "
          "--param batch=8 --param polish=0 -o " +
          dir + "/p.json --param curve=" + dir + "/p.json --param rl.curve=" + dir + "/curve.csv");
  EXPECT_EQ(apart.exit_code, 0) << apart.err;
#endif
}

// A report that never reached standard output is a failure: a full disk used to exit 0 for short
// reports (the buffer failed at exit, unchecked) and abort for long ones (fmt's exception). A
// diagnostic that stderr refuses is dropped: progress lines on a full stderr aborted the run.
TEST(CliTest, AReportStandardOutputRefusesIsOneLineExit2) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string to_out = ">" + out_file().string();
  const std::string to_err = "2>" + err_file().string();
  for (const std::string args :
       {"clusters", "models", "place two_tower --cluster paper-k80x2 --placer heft --json"}) {
    SCOPED_TRACE(args);
    expect_one_line_error(run_redirected(args, ">/dev/full", to_err),
                          "standard output: cannot write (No space left on device)");
    expect_one_line_error(run_redirected(args, ">&-", to_err),
                          "standard output: cannot write (Bad file descriptor)");
  }
  EXPECT_EQ(run_redirected("models", ">/dev/null", to_err).exit_code, 0);
  // anneal's rounds print progress from worker threads.
  for (const std::string stderr_to : {"2>/dev/full", "2>&-"}) {
    const RunResult r = run_redirected(
        "place two_tower --cluster paper-k80x2 --placer anneal --progress --budget-seconds 0.5",
        to_out, stderr_to);
    EXPECT_EQ(r.exit_code, 0) << stderr_to;
    EXPECT_NE(r.out.find("step time"), std::string::npos) << r.out;
  }
}

// Output files are written whole or not at all (core/files.h): a trace that hit a file-size limit
// (as on a full disk) was left cut off over the previous one.
TEST(CliTest, AnOutputFileThatCannotBeWrittenKeepsThePreviousOne) {
  const fs::path trace = temp_dir() / "kept_trace.json";
  { std::ofstream(trace) << "previous"; }
  const RunResult r =
      run("place two_tower --cluster paper-k80x2 --placer heft --trace " + trace.string(),
          "trap '' XFSZ; ulimit -f 4;");
  expect_one_line_error(r, trace.string() + ": cannot write file (File too large)");
  EXPECT_EQ(read_all(trace), "previous");
}

// `-o /dev/stdout` into a pipe is written in place: following the link to "pipe:[N]" failed.
TEST(CliTest, APlacementOnStandardOutputReachesAPipe) {
  const RunResult r = run_redirected(
      "place two_tower --cluster paper-k80x2 --placer heft -o /dev/stdout 2>" + err_file().string(),
      "| cat >" + out_file().string() + "; :", "");  // run_redirected's </dev/null goes to ':'
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("\"assignment\""), std::string::npos) << r.out;
}

// A path the file system cannot look at used to end the process (filesystem_error, exit 134).
TEST(CliTest, ALoopOfLinksIsOneLineExit2) {
  const fs::path loop = temp_dir() / "loop_a";
  fs::remove(loop);
  fs::remove(temp_dir() / "loop_b");
  fs::create_symlink("loop_b", loop);
  fs::create_symlink("loop_a", temp_dir() / "loop_b");
  expect_one_line_error(run("info " + loop.string()),
                        loop.string() + ": cannot open: Too many levels of symbolic links");
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer heft -o " + loop.string()),
      loop.string() + ": cannot open file for writing (Too many levels of symbolic links)");
#ifdef DPLACE_WITH_TORCH
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer rl --checkpoint " + loop.string()),
      "--param checkpoint=" + loop.string() + ": Too many levels of symbolic links");
#endif
}

// A graph is read twice (its format from the first bytes, then the reader): a pipe looked empty
// and a FIFO hung, so they are refused. A cluster or placement from a device is read in blocks:
// /dev/zero grew the process by gigabytes.
TEST(CliTest, InputsThatAreNotRegularFilesAreOneLineExit2) {
  const fs::path fifo = temp_dir() / "graph_fifo";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_one_line_error(run("info " + fifo.string()),
                        fifo.string() + ": not a regular file (a pipe, FIFO or device)");
  expect_one_line_error(run("place two_tower --cluster /dev/zero --placer heft"),
                        "/dev/zero: invalid JSON at byte 1");
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer expert --placement /dev/zero"),
      "/dev/zero: invalid JSON at byte 1");
}

// An error line that quotes its input is cut at 2,000 characters (a 200-million-digit number in a
// cluster file made a 200 MB line).
TEST(CliTest, AnErrorLineIsCutAt2000Characters) {
  const fs::path cluster = temp_dir() / "long_number.json";
  { std::ofstream(cluster) << "{\"name\": " << std::string(50000, '9') << "}"; }
  const RunResult r = run("place two_tower --cluster " + cluster.string() + " --placer heft");
  expect_one_line_error(r, "invalid JSON");
  EXPECT_LT(r.err.size(), 2100u);
  EXPECT_NE(r.err.find("... (48"), std::string::npos) << r.err.substr(0, 100);
  EXPECT_NE(r.err.find(" more bytes)"), std::string::npos) << r.err.substr(0, 100);
}

#ifdef DPLACE_WITH_TORCH
// rl's checkpoint is written through a unique temporary name: a fixed PATH.tmp was shared by two
// runs saving to one path, and a user's own file of that name was overwritten. measure-cmd's
// placement file is checked once written (a full TMPDIR handed the command an empty file).
TEST(CliTest, RlFilesAreWrittenWholeOrTheRunSaysWhy) {
  const fs::path dir = temp_dir() / "ck_dir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  { std::ofstream(dir / "ck.tmp") << "notes"; }
  const std::string rl =
      "place two_tower --cluster paper-k80x2 --placer rl --samples 8 --param batch=8 "
      "--param polish=0 ";
  const RunResult saved = run(rl + "--checkpoint " + (dir / "ck").string());
  EXPECT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_EQ(read_all(dir / "ck.tmp"), "notes");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ck", "ck.tmp"}));
  // A file-size limit of 1 KiB stands for a full TMPDIR: the placement file is 2.4 KB.
  expect_one_line_error(
      run(rl + "--measure-cmd 'echo 0.01 # {placement}'", "trap '' XFSZ; ulimit -f 1;"),
      "measure-cmd: cannot write the placement file");
}
#endif

#ifdef DPLACE_WITH_TORCH
// Whether every process of group `pgid` has ended (gone, or a zombie waiting to be reaped).
bool process_group_ended(pid_t pgid) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close_paren = line.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream fields(line.substr(close_paren + 2));
    char state = 0;
    pid_t parent = 0, group = 0;
    fields >> state >> parent >> group;
    if (group == pgid && state != 'Z') return false;
  }
  return true;
}

// LibTorch's libraries that cannot be mapped under an address-space limit are lack of memory,
// exit 3, not a missing module (exit 2 with a hint to set DPLACE_RL_TORCH_MODULE).
TEST(CliTest, NoMemoryToLoadLibTorchIsExit3) {
  const RunResult r =
      run("place two_tower --cluster paper-k80x2 --placer rl --samples 8 --param batch=8 "
          "--param polish=0",
          "ulimit -v 450000; timeout 60");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find("placer 'rl': out of host memory loading its LibTorch module"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("DPLACE_RL_TORCH_MODULE"), std::string::npos) << r.err;
}

// A placer that runs out of memory in compare used to end the run with exit 3 and no table: the
// other placers' rows were lost. They are printed; the run still ends with exit 3.
TEST(CliTest, CompareKeepsTheRowsOfPlacersThatHadTheirResources) {
  const RunResult r =
      run("compare two_tower --cluster paper-k80x2 --placers heft,rl,m-etf --param rl.samples=8 "
          "--param rl.batch=8 --param rl.polish=0 --json",
          "ulimit -v 450000; timeout 60");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find("compare: placer rl did not finish: the system refused a resource"),
            std::string::npos)
      << r.err;
  const Json rows = Json::parse(r.out)["rows"];
  ASSERT_EQ(rows.size(), 3u) << r.out;
  EXPECT_GT(rows[0]["step_time_s"].get<double>(), 0);
  EXPECT_NE(rows[1]["error"].get<std::string>().find("out of host memory"), std::string::npos);
  EXPECT_GT(rows[2]["step_time_s"].get<double>(), 0);
}

// A measurement runs in a process group of its own, which Ctrl-C does not reach: a dplace
// interrupted or killed left it running to its end (a real training run, perhaps). SIGTERM (and
// SIGINT, SIGHUP) now kill the measurements' groups and remove their placement files, then end
// dplace as before.
TEST(CliTest, AKilledRlRunTakesItsMeasurementsWithIt) {
  const fs::path group_file = temp_dir() / "measure_pgid.txt";
  const fs::path pid_file = temp_dir() / "dplace_pid.txt";
  const fs::path placement_file = temp_dir() / "measure_placement.txt";
  fs::remove(group_file);
  fs::remove(placement_file);
  // Several measurements run at once: each appends a whole line (one write), so that a shell
  // killed between truncating a shared file and writing it cannot leave it empty.
  const std::string command =
      std::string(DPLACE_BINARY) +
      " place two_tower --cluster paper-k80x2 --placer rl --samples 8 --param batch=8 "
      "--param polish=0 --measure-cmd 'echo {placement} >> " +
      placement_file.string() + "; echo $$ >> " + group_file.string() +
      "; sleep 60; echo 0.01 # {placement}' >/dev/null 2>&1 </dev/null & echo $! > " +
      pid_file.string();
  ASSERT_EQ(std::system(command.c_str()), 0);
  const pid_t dplace_pid = std::stoi(read_all(pid_file));
  pid_t measurement_group = 0;
  // Whatever fails below, nothing is left running.
  struct KillOnExit {
    const pid_t& dplace;
    const pid_t& group;
    ~KillOnExit() {
      kill(dplace, SIGKILL);
      if (group > 0) kill(-group, SIGKILL);
    }
  } kill_on_exit{dplace_pid, measurement_group};
  for (int i = 0; i < 1500 && measurement_group == 0; ++i) {  // 30 s for LibTorch to load
    const std::string text = read_all(group_file);
    if (text.find('\n') != std::string::npos) measurement_group = std::stoi(text);
    if (measurement_group == 0) usleep(20000);
  }
  ASSERT_GT(measurement_group, 0) << "the measurement did not start";
  EXPECT_FALSE(process_group_ended(measurement_group));
  ASSERT_EQ(kill(dplace_pid, SIGTERM), 0);
  bool ended = false;
  for (int i = 0; i < 250 && !ended; ++i) {
    ended = process_group_ended(measurement_group);
    if (!ended) usleep(20000);
  }
  EXPECT_TRUE(ended) << "the measurement outlived dplace";
  // Its placement file in TMPDIR is gone too (the first one listed: it was written before the
  // group's line was read).
  std::string placement = read_all(placement_file);
  placement = placement.substr(0, placement.find('\n'));
  ASSERT_FALSE(placement.empty());
  EXPECT_FALSE(fs::exists(placement)) << placement;
  fs::remove(placement);
}
#endif

TEST(CliTest, InvalidPlacementFileForAPlacerIsOneLineExit2) {
  // It used to reach the expert placer (and anneal's start) unchecked and abort the run.
  const fs::path graph = temp_dir() / "colocated.json";
  std::ofstream(graph) << R"({"format": "dplace.graph/1", "name": "col", "ops": [
      {"name": "a", "type": "MatMul", "flops": 1e9, "output_bytes": 1000, "colocate": "g"},
      {"name": "b", "type": "MatMul", "inputs": ["a"], "flops": 1e9, "output_bytes": 1000,
       "colocate": "g"}]})";
  const fs::path split = temp_dir() / "split_group.json";
  std::ofstream(split) << R"({"format": "dplace.placement/1",
      "assignment": {"a": "/gpu:0", "b": "/gpu:1"}})";
  for (const char* placer : {"expert", "anneal"}) {
    expect_one_line_error(
        run(std::string("place ") + graph.string() + " --cluster paper-k80x2 --placer " + placer +
            " --placement " + split.string()),
        "colocation group 'g' is split over '/gpu:0' and '/gpu:1'");
  }
  expect_one_line_error(
      run("compare " + graph.string() + " --cluster paper-k80x2 --placement " + split.string()),
      "split_group.json: colocation group 'g'");
}

TEST(CliTest, UnwritableOutputIsRefusedBeforeTheSearch) {
  // The paths are checked first: a search of a whole budget used to end in this error.
  for (const char* flag : {"-o", "--trace", "--dot"}) {
    expect_one_line_error(run(std::string("place two_tower --cluster paper-k80x2 --placer anneal "
                                          "--budget-seconds 600 ") +
                              flag + " /nonexistent/out.json"),
                          "/nonexistent/out.json: cannot open file for writing (no directory");
  }
  expect_one_line_error(
      run("compare two_tower --cluster paper-k80x2 --trace " + temp_dir().string()),
      "cannot open file for writing (it is a directory)");
}

TEST(CliTest, EmptyNamesAndRepeatedPlacersAreRefused) {
  // An unset shell variable gives an empty value, which used to read as "not given": no file was
  // written, the model's own expert replaced nothing, the pipeline took the implied cluster.
  for (const char* flag : {"-o", "--trace", "--dot", "--placement"}) {
    expect_one_line_error(
        run(std::string("place two_tower --cluster paper-k80x2 --placer expert ") + flag + " ''"),
        "empty value: expected a");
  }
  expect_one_line_error(run("place two_tower --cluster '' --placer expert"),
                        "--cluster: empty value: expected a preset or a cluster file");
  expect_one_line_error(run("simulate two_tower --cluster paper-k80x2 --placement ''"),
                        "--placement: empty value");
  expect_one_line_error(run("pipeline two_tower --cluster ''"), "--cluster: empty value");
  // CLI11 read an empty number as 0, so the message said "got 0"; an empty size read as "not
  // given" and built the model at its default.
  expect_one_line_error(run("info rnnlm --layers ''"),
                        "--layers '': expected a whole number in decimal");
  // Sizes are decimal: CLI11 read "010" as 8 and "0x10" as 16 and built another graph.
  const RunResult padded = run("info resnet50 --inference --batch 010 --json");
  ASSERT_EQ(padded.exit_code, 0) << padded.err;
  const RunResult ten = run("info resnet50 --inference --batch 10 --json");
  EXPECT_EQ(Json::parse(padded.out)["forward_flops"], Json::parse(ten.out)["forward_flops"]);
  expect_one_line_error(run("info resnet50 --batch 0x10"),
                        "--batch '0x10': expected a whole number in decimal, at most 2147483647");
  // One minus sign at most: "--5" ran as batch 5 (the parser took the second sign itself).
  expect_one_line_error(run("info two_tower --batch=--5"),
                        "--batch '--5': expected a whole number in decimal");
  expect_one_line_error(run("info ''"), "GRAPH: empty value: expected a model name");
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer anneal --budget-seconds ''"),
      "--budget-seconds: empty value: expected a number of seconds");
  expect_one_line_error(run("pipeline two_tower --cluster paper-k80x2 --time-limit ''"),
                        "--time-limit: empty value: expected a number of seconds");
  // CLI11's delimiter dropped empty items: "heft," ran heft alone without a word.
  for (const char* list : {"heft,", "heft,,metis", ",heft", ""}) {
    expect_one_line_error(
        run(std::string("compare two_tower --cluster paper-k80x2 --placers '") + list + "'"),
        std::string("--placers '") + list +
            "': empty placer name (expected comma-separated names)");
  }
  // A placer named twice used to run twice, as two identical rows.
  expect_one_line_error(run("compare two_tower --cluster paper-k80x2 --placers heft,expert,heft"),
                        "--placers: 'heft' is named twice");
#ifdef DPLACE_WITH_TORCH
  expect_one_line_error(run("place two_tower --cluster paper-k80x2 --placer rl --measure-cmd ''"),
                        "--param measure-cmd=: expected a command containing {placement}");
#endif
}

TEST(CliTest, CompareGivesNoSpeedUpToAnOutOfMemoryRow) {
  // 5 MB of weights per op, GPUs of 6 MB: every op on one GPU is OOM, heft uses the CPU.
  const fs::path graph = temp_dir() / "memchain.json";
  std::ofstream(graph) << R"({"format": "dplace.graph/1", "name": "memchain", "ops": [
      {"name": "m0", "type": "MatMul", "flops": 1e9, "output_bytes": 1e5, "param_bytes": 5e6},
      {"name": "m1", "type": "MatMul", "inputs": ["m0"], "flops": 1e9, "output_bytes": 1e5,
       "param_bytes": 5e6}]})";
  const fs::path cluster = temp_dir() / "tight.json";
  std::ofstream(cluster) << R"({"format": "dplace.cluster/1", "name": "tight", "devices": [
      {"name": "/cpu:0", "kind": "cpu", "peak_flops": 1e12, "mem_bandwidth_bytes_per_s": 5e10,
       "memory_bytes": 1e11},
      {"name": "/gpu:0", "kind": "gpu", "peak_flops": 1e13, "mem_bandwidth_bytes_per_s": 5e11,
       "memory_bytes": 6e6}],
      "default_link": {"bandwidth_bytes_per_s": 1e10, "latency_s": 1e-5}})";
  const RunResult r = run("compare " + graph.string() + " --cluster " + cluster.string() +
                          " --placers single-gpu,heft --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["best"], "heft");
  EXPECT_TRUE(j["best_baseline"].is_null());  // the only baseline, single-gpu, is OOM
  for (const Json& row : j["rows"]) {
    EXPECT_TRUE(row["speedup_vs_best_baseline"].is_null()) << row["placer"];
  }
}

TEST(CliTest, CompareCsvQuotesAnErrorThatHoldsQuotes) {
  // The error field was wrapped in quotes without doubling the quotes inside it: a row of
  // --param 'scotch.imbalance=1"2,3' split into ten fields under a header of nine.
  const RunResult r =
      run("compare two_tower --cluster paper-k80x2 --placers scotch,expert "
          "--param 'scotch.imbalance=1\"2,3' --csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nscotch,,,,,,,,\"placer 'scotch': --param imbalance='1\"\"2,3' is not a "
                       "number\"\n"),
            std::string::npos)
      << r.out;
}

TEST(CliTest, JsonOutputStaysJsonWhenMetisComplains) {
  // Three ops on five devices: METIS prints "***You are trying to partition a graph into too
  // many parts!" on stdout, which used to land in front of the JSON object.
  const RunResult r =
      run("place " + data("io/tiny_graph.json") + " --cluster paper-k80x4 --placer metis --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NO_THROW(Json::parse(r.out)) << r.out;
}

// anneal's default two searches, from the two least-cost starts, keep the better one. On
// two_tower / cpu+igpu the least-cost start (metis) is a trap the search at --seed 1 does not
// leave, and the search from the next start (scotch's mapping at --seed 1, searched at --seed
// 1001) gets further.
TEST(CliTest, AnnealKeepsTheBetterOfTheSearchesFromItsTwoBestStarts) {
  auto step_and_note = [](const std::string& args) {
    const RunResult r = run("place two_tower --cluster cpu+igpu --placer anneal --json " + args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const Json j = Json::parse(r.out);
    return std::make_pair(j["step_time_s"].get<double>(), j["note"].get<std::string>());
  };
  const std::string scotch = (temp_dir() / "two_tower_scotch.json").string();
  ASSERT_EQ(
      run("place two_tower --cluster cpu+igpu --placer scotch --seed 1 -o " + scotch).exit_code, 0);
  const auto [first_s, first_note] = step_and_note("--param start=metis --seed 1");
  const auto [second_s, second_note] =
      step_and_note("--param start=expert --placement " + scotch + " --seed 1001");
  ASSERT_LT(second_s, first_s) << "this input no longer shows the second start winning";
  const auto [both_s, both_note] = step_and_note("--seed 1");
  EXPECT_EQ(both_s, second_s);
  EXPECT_NE(both_note.find("the best: started from scotch"), std::string::npos) << both_note;
  EXPECT_NE(both_note.find("the other: from metis"), std::string::npos) << both_note;
}

// `dplace placers --json` says which placers read --seed; every other one must give the same
// placement at any seed. On rnnlm at 2 GPUs libscotch's seeded mapping gives 916.1 ms at seed 1
// and 885.9 ms at seed 4, so a seeded placer listed as unseeded fails here.
TEST(CliTest, PlacersListedAsNotRandomisedIgnoreTheSeed) {
  const RunResult list = run("placers --json");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const Json listed = Json::parse(list.out);
  std::vector<std::string> unseeded;
  for (const Json& p : listed["placers"]) {
    if (p["randomised"] == true) continue;
    if (p["name"] == "rl") continue;  // (a minute per run; its flag is checked below)
    unseeded.push_back(p["name"].get<std::string>());
  }
  EXPECT_GE(unseeded.size(), 8u);
  for (const std::string& name : unseeded) {
    SCOPED_TRACE(name);
    std::string placements[2];
    for (int i = 0; i < 2; ++i) {
      const fs::path out = temp_dir() / ("seed-" + std::to_string(i) + ".json");
      const RunResult r = run("place rnnlm --cluster paper-k80x2 --placer " + name + " --seed " +
                              (i == 0 ? "1" : "4") + " -o " + out.string());
      ASSERT_EQ(r.exit_code, 0) << r.err;
      placements[i] = read_all(out);
    }
    EXPECT_TRUE(placements[0] == placements[1]) << "different placements at seeds 1 and 4";
  }
  for (const char* seeded : {"scotch", "mincut", "metis", "anneal", "rl"}) {
    EXPECT_EQ(std::count(unseeded.begin(), unseeded.end(), seeded), 0) << seeded;
  }
}

TEST(CliTest, SeedMustBeAWholeNumberInRange) {
  // CLI11 read "0x10" as 0 and wrapped -1 and 2^64 without complaint; pipeline's --seed took them
  // until it shared place's parser.
  for (const char* command : {"place two_tower --cluster paper-k80x2 --placer anneal",
                              "pipeline two_tower --cluster paper-k80x2"}) {
    for (const char* seed : {"0x10", "-1", "18446744073709551616", "1.5", ""}) {
      expect_one_line_error(run(std::string(command) + " --seed '" + seed + "'"),
                            std::string("--seed '") + seed + "'");
    }
  }
}

TEST(CliTest, ControlCharactersInAnErrorAreEscaped) {
  // A damaged file can put any byte in a name that the error then quotes.
  const fs::path p = temp_dir() / "control_char.json";
  std::ofstream(p) << R"({"format": "dplace.graph/1", "name": "g", "ops": [
      {"name": "x", "type": "Input", "output_bytes": 8},
      {"name": "y", "type": "Relu", "inputs": ["a\u001cb\nc"], "output_bytes": 8}]})";
  const RunResult r = run("info " + p.string());
  expect_one_line_error(r, "a\\x1cb c");
}

TEST(CliTest, PlacementOnUnknownDeviceIsOneLineExit2) {
  const fs::path p = temp_dir() / "bad_device.json";
  std::ofstream(p) << R"({"format": "dplace.placement/1", "assignment": {"x": "/cpu:0",
      "a": "/gpu:7", "b": "/gpu:0", "y": "/cpu:0"}})";
  expect_one_line_error(run("simulate " + data("cli/chain.json") + " --cluster " +
                            data("cli/two_devices.json") + " --placement " + p.string()),
                        "/gpu:7");
}

TEST(CliTest, PlacementMissingAnOpIsOneLineExit2) {
  const fs::path p = temp_dir() / "missing_op.json";
  std::ofstream(p) << R"({"format": "dplace.placement/1", "assignment": {"x": "/cpu:0",
      "a": "/gpu:0", "b": "/gpu:0"}})";
  expect_one_line_error(run("simulate " + data("cli/chain.json") + " --cluster " +
                            data("cli/two_devices.json") + " --placement " + p.string()),
                        "'y'");
}

// Every file of the malformed corpus is rejected with exit 2 and one line naming the file.
TEST(CliTest, MalformedGraphCorpusIsRejectedCleanly) {
  const fs::path dir = data("malformed/graph");
  ASSERT_TRUE(fs::exists(dir)) << dir;
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    SCOPED_TRACE(entry.path().string());
    expect_one_line_error(run("info " + entry.path().string()), entry.path().string());
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

TEST(CliTest, MalformedClusterCorpusIsRejectedCleanly) {
  const fs::path dir = data("malformed/cluster");
  ASSERT_TRUE(fs::exists(dir)) << dir;
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    SCOPED_TRACE(entry.path().string());
    expect_one_line_error(
        run("place two_tower --placer single-cpu --cluster " + entry.path().string()),
        entry.path().string());
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

#ifdef DPLACE_WITH_TORCH
// The rl placer end to end: a fixed sample count and a fixed number of polishing moves make the run
// deterministic and quick, and the placement it writes simulates to the step time it reported. The
// second run gives the run controls as --param, the first as options of their own: the same run.
TEST(CliTest, RlPlacerRunsDeterministicallyAndWritesItsCurve) {
  const std::string out = (temp_dir() / "rl.json").string();
  const std::string curve = (temp_dir() / "rl_curve.csv").string();
  const std::string common =
      "place two_tower --cluster paper-k80x2 --placer rl --seed 3 --param batch=8 "
      "--param polish=500 --json ";
  const std::string args = common + "--param samples=64 --param curve=" + curve;
  RunResult a = run(common + "--samples 64 --curve " + curve + " -o " + out);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  RunResult b = run(args);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  Json ja = Json::parse(a.out), jb = Json::parse(b.out);
  EXPECT_EQ(ja["step_time_s"], jb["step_time_s"]);
  // The distinct placements of each batch of 8 (at least one per batch, at most all 64 samples),
  // the final greedy decoding, then the polishing's start and its rounds of 500 moves (at least
  // one wave of two, at most the default 8); the note counts the samples and reports the
  // polishing.
  EXPECT_EQ(ja["evaluations"], jb["evaluations"]);
  EXPECT_GE(ja["evaluations"].get<int64_t>(), 8 + 1 + 1 + 2 * 500);
  EXPECT_LE(ja["evaluations"].get<int64_t>(), 64 + 1 + 1 + 8 * 500);
  EXPECT_NE(ja["note"].get<std::string>().find("64 samples"), std::string::npos) << ja["note"];
  EXPECT_NE(ja["note"].get<std::string>().find("polished by anneal"), std::string::npos)
      << ja["note"];
  RunResult simulated =
      run("simulate two_tower --cluster paper-k80x2 --placement " + out + " --json");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_EQ(ja["step_time_s"], Json::parse(simulated.out)["step_time_s"]);
  const std::string csv = read_all(curve);
  EXPECT_EQ(csv.rfind("update,samples,", 0), 0u) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 8);  // header + one row per update
}

TEST(CliTest, RlPlacerBadParamIsOneLineExit2) {
  expect_one_line_error(run("place two_tower --cluster paper-k80x2 --placer rl --param batch=zero"),
                        "batch");
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer rl --param measure-cmd=true"),
      "{placement}");
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer rl --samples 8 --param samples=9"),
      "--samples and --param samples= both given");
}

// A measurement runs with the user's environment: the one BLAS thread the policy wants is not
// passed on (a real CPU step measured with OPENBLAS_NUM_THREADS=1 would be too slow).
TEST(CliTest, RlMeasureCommandInheritsTheUsersEnvironment) {
  const RunResult r =
      run("place two_tower --cluster paper-k80x2 --placer rl --param batch=8 --samples 8 "
          "--measure-cmd 'echo {placement} >/dev/null; test -z \"$OPENBLAS_NUM_THREADS\" && echo "
          "0.001 || echo leaked'",
          "env -u OPENBLAS_NUM_THREADS");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// LibTorch is a module that the rl placer loads (placers/rl/torch_module.h), not a library of the
// binary: starting dplace does not load it, every other placer runs without it, and rl without it
// is a one-line error naming the file it tried.
TEST(CliTest, LibTorchIsLoadedOnlyByTheRlPlacer) {
  // The dynamic loader lists what the binary needs and exits (what ldd does).
  const RunResult libs = run("", "LD_TRACE_LOADED_OBJECTS=1");
  ASSERT_EQ(libs.exit_code, 0) << libs.err;
  EXPECT_NE(libs.out.find("libc.so"), std::string::npos) << libs.out;
  EXPECT_EQ(libs.out.find("libtorch"), std::string::npos) << libs.out;

  const std::string missing = (temp_dir() / "no_such_module.so").string();
  const std::string env = "DPLACE_RL_TORCH_MODULE=" + missing;
  const RunResult heft = run("place two_tower --cluster paper-k80x2 --placer heft", env);
  EXPECT_EQ(heft.exit_code, 0) << heft.err;
  expect_one_line_error(
      run("place two_tower --cluster paper-k80x2 --placer rl", env),
      "placer 'rl': cannot load its LibTorch module (" + missing + ": no such file)");
  const RunResult compare =
      run("compare two_tower --cluster paper-k80x2 --placers heft,rl --json", env);
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  EXPECT_NE(compare.out.find("cannot load its LibTorch module"), std::string::npos) << compare.out;
}
#endif

}  // namespace
}  // namespace dplace
