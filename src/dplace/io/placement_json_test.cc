#include "dplace/io/placement_json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dplace/cluster/cluster_json.h"
#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"
#include "dplace/io/graph_json.h"

namespace dplace {
namespace {

const std::string kData = DPLACE_TEST_DATA_DIR;

class PlacementJsonTest : public ::testing::Test {
 protected:
  Graph graph_ = read_graph_file(kData + "/io/tiny_graph.json");
  Cluster cluster_ = read_cluster_file(kData + "/io/tiny_cluster.json");
  const DeviceId cpu_ = DeviceId(0);
  const DeviceId gpu_ = DeviceId(1);
};

TEST_F(PlacementJsonTest, ReadsAssignmentInGraphOrder) {
  const Placement p = read_placement_file(kData + "/io/tiny_placement.json", graph_, cluster_);
  EXPECT_EQ(p.device_of_op, (std::vector<DeviceId>{cpu_, gpu_, gpu_}));
}

TEST_F(PlacementJsonTest, ToJsonNamesGraphClusterAndEveryOp) {
  const Placement p{{gpu_, cpu_, gpu_}};
  const Json doc = placement_to_json(graph_, cluster_, p);
  EXPECT_EQ(doc, Json::parse(R"({ "format": "dplace.placement/1", "graph": "tiny",
      "cluster": "tiny-box", "assignment": { "x": "/gpu:0", "mm": "/cpu:0", "y": "/gpu:0" } })"));
  EXPECT_EQ(read_placement_json(doc, "mem", graph_, cluster_), p);
}

TEST_F(PlacementJsonTest, FileRoundTripKeepsGraphOrderOnePerLine) {
  const Placement p{{cpu_, gpu_, cpu_}};
  const std::string path = scratch_path("placement.json");
  write_placement_file(graph_, cluster_, p, path);
  EXPECT_EQ(read_placement_file(path, graph_, cluster_), p);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "{\n  \"format\": \"dplace.placement/1\",\n  \"graph\": \"tiny\",\n"
            "  \"cluster\": \"tiny-box\",\n  \"assignment\": {\n    \"x\": \"/cpu:0\",\n"
            "    \"mm\": \"/gpu:0\",\n    \"y\": \"/cpu:0\"\n  }\n}\n");
  std::filesystem::remove(path);
}

TEST_F(PlacementJsonTest, GraphAndClusterNamesAreInformational) {
  const Json doc = Json::parse(R"({ "format": "dplace.placement/1", "graph": "other",
      "cluster": "elsewhere", "assignment": { "x": "/cpu:0", "mm": "/cpu:0", "y": "/cpu:0" } })");
  EXPECT_EQ(read_placement_json(doc, "p.json", graph_, cluster_).device_of_op,
            (std::vector<DeviceId>{cpu_, cpu_, cpu_}));
  // Names that differ are warnings (a placement for another cluster whose device names exist
  // read without a word), and names that match are not.
  std::vector<std::string> warnings;
  read_placement_json(doc, "p.json", graph_, cluster_, &warnings);
  EXPECT_EQ(warnings, (std::vector<std::string>{
                          "p.json: made for graph 'other', read with graph '" + graph_.name() + "'",
                          "p.json: made for cluster 'elsewhere', read with cluster '" +
                              cluster_.name() + "'"}));
  warnings.clear();
  read_placement_json(
      placement_to_json(graph_, cluster_, read_placement_json(doc, "p.json", graph_, cluster_)),
      "q.json", graph_, cluster_, &warnings);
  EXPECT_TRUE(warnings.empty());
}

struct MalformedCase {
  const char* file;
  const char* rest;  // the message after "<path>: "; a trailing '*' means "starts with"
};

TEST_F(PlacementJsonTest, MalformedFilesGiveOneLineMessages) {
  const std::vector<MalformedCase> cases = {
      {"missing_op.json", "assignment: op 'y' has no device"},
      {"missing_many.json", "assignment: op 'mm' and 1 more of the 3 ops have no device"},
      {"unknown_device.json",
       "assignment: op 'mm': unknown device '/gpu:7' (devices of cluster 'tiny-box': /cpu:0, "
       "/gpu:0)"},
      {"unknown_op.json", "assignment: unknown op 'zz' (not in graph 'tiny')"},
      // nlohmann keeps the last of two equal keys; the first assignment used to vanish.
      {"duplicate_op.json", "'assignment': key 'mm' appears twice in one object"},
      {"device_not_string.json", "assignment: op 'x': expected a device name"},
      {"assignment_not_object.json",
       "field 'assignment': expected an object mapping op name to device name"},
      {"missing_assignment.json", "field 'assignment': missing"},
      {"wrong_format.json",
       "field 'format': expected \"dplace.placement/1\", got \"dplace.graph/1\""},
      {"not_object.json", "expected a JSON object"},
      {"truncated.json", "truncated JSON at byte*"},
      {"empty.json", "file is empty"},
      {"does_not_exist.json", "cannot open file"},
  };
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = kData + "/malformed/placement/" + c.file;
    std::string message = "(no error)";
    try {
      read_placement_file(path, graph_, cluster_);
    } catch (const FormatError& e) {
      message = e.what();
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    std::string expected = path + ": " + c.rest;
    if (expected.back() == '*') {
      expected.pop_back();
      EXPECT_EQ(message.substr(0, expected.size()), expected);
    } else {
      EXPECT_EQ(message, expected);
    }
  }
}

}  // namespace
}  // namespace dplace
