// Damaged inputs never crash dplace: seeded mutations of the valid test files (graph, cluster and
// placement JSON, the dnn-partitioning JSON, a PipeDream graph.txt, an ONNX model) go through the
// commands that read them, and every run must exit 0 (the damage was harmless) or 2 with one
// printable line on stderr. JSON files are damaged structurally (a member removed, a value
// replaced by one of the wrong type or range, an array element repeated) as well as byte by byte;
// the others byte by byte (flips, truncation). This is how an unlinked device pair (a cluster with
// its `links` removed) was found to abort several placers.
//
// Deterministic: the mutations come from fixed seeds.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cli_run.h"
#include "dplace/core/json.h"
#include "dplace/core/rng.h"

namespace dplace {
namespace {

using namespace cli_testing;  // NOLINT: the helpers of cli_run.h

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Values of the wrong type or out of range.
Json odd_value(Rng& rng) {
  const std::vector<Json> odd = {
      nullptr, -1,           0,    1e308, -1e308, "x", "", Json::array(), Json::object(),
      1.5,     4294967297LL, true, "NaN"};
  return odd[rng.uniform_int(odd.size())];
}

// Every value in the document, as JSON pointers.
void collect(const Json& j, const Json::json_pointer& at, std::vector<Json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) collect(it.value(), at / it.key(), out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) collect(j[i], at / i, out);
  }
}

std::string mutate_json(const std::string& text, Rng& rng) {
  Json doc = Json::parse(text);
  const int edits = 1 + static_cast<int>(rng.uniform_int(3));
  for (int e = 0; e < edits; ++e) {
    std::vector<Json::json_pointer> paths;
    collect(doc, Json::json_pointer(), paths);
    if (paths.size() < 2) break;
    const Json::json_pointer at = paths[1 + rng.uniform_int(paths.size() - 1)];
    Json& parent = doc[at.parent_pointer()];
    const double r = rng.uniform01();
    if (r < 0.3) {
      if (parent.is_object()) {
        parent.erase(at.back());
      } else {
        parent.erase(std::stoul(at.back()));
      }
    } else if (r < 0.85 || !parent.is_array()) {
      doc[at] = odd_value(rng);
    } else {
      parent.push_back(doc[at]);
    }
  }
  return doc.dump();
}

std::string mutate_bytes(std::string bytes, Rng& rng) {
  if (bytes.size() > 1 && rng.uniform01() < 0.3)
    return bytes.substr(0, rng.uniform_int(bytes.size()));
  const int flips = 1 + static_cast<int>(rng.uniform_int(8));
  for (int i = 0; i < flips && !bytes.empty(); ++i) {
    bytes[rng.uniform_int(bytes.size())] = static_cast<char>(rng.uniform_int(256));
  }
  return bytes;
}

struct Target {
  std::string name;
  std::string source;     // valid file under tests/data
  std::string extension;  // of the damaged copy (the readers go by it)
  bool json = false;
  // The command lines that read the damaged file at `path`.
  std::function<std::vector<std::string>(const std::string& path)> commands;
};

void expect_clean(const RunResult& r, const std::string& args) {
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2)
      << args << "\nexit " << r.exit_code << ": " << r.err;
  if (r.exit_code != 2) return;
  EXPECT_EQ(r.err.rfind("dplace: ", 0), 0u) << args << "\n" << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << "\nmore than one line: " << r.err;
  for (const char c : r.err.substr(0, r.err.size() - 1)) {
    ASSERT_FALSE(static_cast<unsigned char>(c) < 0x20) << args << "\ncontrol character: " << r.err;
  }
}

TEST(CliMutationTest, DamagedInputsExitCleanly) {
  const std::string tiny_graph = data("io/tiny_graph.json");
  const std::string tiny_cluster = data("io/tiny_cluster.json");
  const std::vector<Target> targets = {
      {"graph", "cli/chain.json", ".json", true,
       [](const std::string& p) {
         return std::vector<std::string>{
             "info " + p, "place " + p + " --cluster paper-k80x2 --placer heft",
             "place " + p + " --cluster paper-k80x2 --placer anneal --budget-seconds 1"};
       }},
      {"cluster", "io/tiny_cluster.json", ".json", true,
       [](const std::string& p) {
         std::vector<std::string> out;
         for (const char* placer : {"heft", "scotch", "m-sct", "anneal", "single-gpu"}) {
           out.push_back("place rnnlm --layers 1 --seq 2 --cluster " + p + " --placer " + placer +
                         " --budget-seconds 1");
         }
         return out;
       }},
      {"placement", "io/tiny_placement.json", ".json", true,
       [&](const std::string& p) {
         return std::vector<std::string>{"simulate " + tiny_graph + " --cluster " + tiny_cluster +
                                         " --placement " + p};
       }},
      {"dnn-partitioning",
       "workloads/msr-dnn-partitioning/latency-inputs/LayerGraphs/bert24_inference.json", ".json",
       true,
       [](const std::string& p) {
         return std::vector<std::string>{"info " + p, "pipeline " + p + " --contiguous"};
       }},
      {"graph.txt", "workloads/pipedream-profiles/vgg16.graph.txt", ".graph.txt", false,
       [](const std::string& p) {
         return std::vector<std::string>{"info " + p,
                                         "pipeline " + p + " --contiguous --cluster paper-k80x4"};
       }},
      {"onnx", "onnx/op_mix.onnx", ".onnx", false,
       [](const std::string& p) { return std::vector<std::string>{"info " + p}; }},
  };
  constexpr int kMutationsPerTarget = 12;
  int refused = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const Target& t = targets[i];
    SCOPED_TRACE(t.name);
    const std::string valid = read_all(data(t.source));
    ASSERT_FALSE(valid.empty()) << t.source;
    Rng rng(0x5eed0000 + i);
    const std::string path = (temp_dir() / ("damaged" + t.extension)).string();
    for (int m = 0; m < kMutationsPerTarget; ++m) {
      const bool structural = t.json && rng.uniform01() < 0.75;
      const std::string damaged = structural ? mutate_json(valid, rng) : mutate_bytes(valid, rng);
      write(path, damaged);
      const std::vector<std::string> commands = t.commands(path);
      const std::string& args = commands[rng.uniform_int(commands.size())];
      const RunResult r = run(args);
      expect_clean(r, args + "\nfile: " + damaged.substr(0, 2000));
      refused += r.exit_code == 2;
    }
    // The damage is real: most damaged files are refused (some, e.g. an extra array element or a
    // flipped byte in a name, are still valid input).
    EXPECT_GE(refused, kMutationsPerTarget / 3) << "refused so far: " << refused;
    refused = 0;
  }
}

}  // namespace
}  // namespace dplace
