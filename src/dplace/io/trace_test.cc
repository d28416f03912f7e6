#include "dplace/io/trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "dplace/cluster/cluster_json.h"
#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"

namespace dplace {
namespace {

// x (cpu) -> mm (gpu) -> y (gpu), with x:0 sent cpu -> gpu. Timings are written by hand, so this
// test does not depend on the simulator.
class TraceTest : public ::testing::Test {
 protected:
  TraceTest() {
    GraphBuilder b("tiny", "inline");
    const OpId x = b.add_op({.name = "x", .type = "Input", .output_bytes = {4096}});
    const OpId mm = b.add_op({.name = "mm",
                              .type = "MatMul",
                              .inputs = {{x, 0}},
                              .output_bytes = {4096},
                              .flops = 2e9,
                              .phase = Phase::kForward});
    b.add_op({.name = "y", .type = "Relu", .inputs = {{mm, 0}}, .output_bytes = {4096}});
    graph_ = std::move(b).build();
    cluster_ = parse_cluster_json(Json::parse(R"({ "format": "dplace.cluster/1", "name": "box",
      "devices": [
        { "name": "/cpu:0", "kind": "cpu", "peak_flops": 1e12, "mem_bandwidth_bytes_per_s": 5e10,
          "memory_bytes": 1e10 },
        { "name": "/gpu:0", "kind": "gpu", "peak_flops": 4e12, "mem_bandwidth_bytes_per_s": 2e11,
          "memory_bytes": 1e10 },
        { "name": "/gpu:1", "kind": "gpu", "peak_flops": 4e12, "mem_bandwidth_bytes_per_s": 2e11,
          "memory_bytes": 1e10 } ],
      "links": [ { "from": "/cpu:0", "to": "/gpu:0", "bandwidth_bytes_per_s": 1e10 },
                 { "from": "/gpu:0", "to": "/gpu:1", "bandwidth_bytes_per_s": 1e10,
                   "directed": true } ] })"),
                                  "inline");
    result_.step_time_s = 4e-3;
    result_.ops = {
        {DeviceId(0), 0.0, 1e-3}, {DeviceId(1), 1.5e-3, 3.5e-3}, {DeviceId(1), 3.5e-3, 4e-3}};
    result_.transfers = {{{OpId(0), 0}, DeviceId(0), DeviceId(1), 4096, 1e-3, 1.5e-3}};
  }

  // The events with this name and phase ("ph").
  std::vector<Json> events(const Json& doc, const std::string& ph, const std::string& name) {
    std::vector<Json> out;
    for (const Json& e : doc.at("traceEvents")) {
      if (e.at("ph") == ph && e.at("name") == name) out.push_back(e);
    }
    return out;
  }

  Graph graph_;
  Cluster cluster_;
  SimResult result_;
};

TEST_F(TraceTest, OneProcessPerDeviceNamedAfterIt) {
  const Json doc = trace_to_json(graph_, cluster_, result_);
  const auto names = events(doc, "M", "process_name");
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[0].at("pid"), 1);
  EXPECT_EQ(names[0].at("args").at("name"), "/cpu:0");
  EXPECT_EQ(names[2].at("pid"), 3);
  EXPECT_EQ(names[2].at("args").at("name"), "/gpu:1");
}

TEST_F(TraceTest, ComputeThreadAndOneThreadPerIncomingLink) {
  const Json doc = trace_to_json(graph_, cluster_, result_);
  std::set<std::tuple<int, int, std::string>> threads;
  for (const Json& e : events(doc, "M", "thread_name")) {
    threads.insert({e.at("pid").get<int>(), e.at("tid").get<int>(),
                    e.at("args").at("name").get<std::string>()});
  }
  // cpu <-> gpu:0 both ways; gpu:0 -> gpu:1 one way only; no link between cpu and gpu:1.
  // Three devices: compute tids 1, 5, 9; the link from device s adds s + 1.
  const std::set<std::tuple<int, int, std::string>> expected = {
      {1, 1, "compute"},     {2, 5, "compute"},     {3, 9, "compute"},
      {1, 3, "from /gpu:0"}, {2, 6, "from /cpu:0"}, {3, 11, "from /gpu:0"}};
  EXPECT_EQ(threads, expected);
}

TEST_F(TraceTest, OpsAreCompleteEventsInMicroseconds) {
  const Json doc = trace_to_json(graph_, cluster_, result_);
  const auto mm = events(doc, "X", "mm");
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_EQ(mm[0].at("cat"), "op");
  EXPECT_EQ(mm[0].at("pid"), 2);
  EXPECT_EQ(mm[0].at("tid"), 5);
  EXPECT_DOUBLE_EQ(mm[0].at("ts").get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(mm[0].at("dur").get<double>(), 2000.0);
  EXPECT_EQ(mm[0].at("args").at("type"), "MatMul");
  EXPECT_EQ(mm[0].at("args").at("phase"), "forward");
  EXPECT_EQ(mm[0].at("args").at("op"), 1);
  const auto y = events(doc, "X", "y");
  ASSERT_EQ(y.size(), 1u);
  EXPECT_FALSE(y[0].at("args").contains("phase"));  // unspecified phase is left out
}

TEST_F(TraceTest, TransfersSitOnTheReceiversLinkThread) {
  const Json doc = trace_to_json(graph_, cluster_, result_);
  const auto t = events(doc, "X", "x:0");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].at("cat"), "transfer");
  EXPECT_EQ(t[0].at("pid"), 2);  // into /gpu:0
  EXPECT_EQ(t[0].at("tid"), 6);  // from /cpu:0
  EXPECT_DOUBLE_EQ(t[0].at("ts").get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(t[0].at("dur").get<double>(), 500.0);
  EXPECT_EQ(t[0].at("args").at("bytes"), 4096);
  EXPECT_EQ(t[0].at("args").at("from"), "/cpu:0");
  EXPECT_EQ(t[0].at("args").at("to"), "/gpu:0");
}

TEST_F(TraceTest, DocumentFollowsTheTraceEventFormat) {
  const Json doc = trace_to_json(graph_, cluster_, result_);
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  EXPECT_DOUBLE_EQ(doc.at("otherData").at("step_time_s").get<double>(), 4e-3);
  int complete = 0;
  std::map<int, int> pid_of_tid;
  for (const Json& e : doc.at("traceEvents")) {
    // Thread ids are non-zero and never shared between processes.
    const int tid = e.at("tid").get<int>();
    EXPECT_GT(tid, 0);
    const auto [it, inserted] = pid_of_tid.emplace(tid, e.at("pid").get<int>());
    EXPECT_EQ(it->second, e.at("pid").get<int>()) << tid;
    ASSERT_TRUE(e.at("name").is_string());
    ASSERT_TRUE(e.at("pid").is_number_integer());
    ASSERT_TRUE(e.at("tid").is_number_integer());
    const std::string ph = e.at("ph");
    ASSERT_TRUE(ph == "X" || ph == "M") << ph;
    if (ph == "X") {
      ++complete;
      EXPECT_TRUE(e.at("ts").is_number());
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
    } else {
      EXPECT_TRUE(e.at("args").is_object());
    }
  }
  EXPECT_EQ(complete, 4);  // three ops, one transfer
}

TEST_F(TraceTest, FileHoldsTheSameDocument) {
  const std::string path = scratch_path("trace.json");
  write_trace_file(graph_, cluster_, result_, path);
  EXPECT_EQ(read_json_file(path), trace_to_json(graph_, cluster_, result_));
  std::filesystem::remove(path);
  EXPECT_THROW(write_trace_file(graph_, cluster_, result_, "/nonexistent-dir/t.json"), FormatError);
}

TEST_F(TraceTest, ResultWithoutTimelineIsABug) {
  EXPECT_DEATH(trace_to_json(graph_, cluster_, SimResult{}), "record_timeline");
}

}  // namespace
}  // namespace dplace
