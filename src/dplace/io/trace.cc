#include "dplace/io/trace.h"

#include <fmt/format.h>

#include <sstream>

#include "dplace/core/error.h"
#include "dplace/core/files.h"

namespace dplace {

namespace {

constexpr double kMicrosPerSecond = 1e6;

// Perfetto treats thread ids as global (as Linux does) and 0 as special, so every track gets its
// own non-zero tid: device d's compute thread is 1 + d * (n + 1), its link from s that plus s + 1.
int pid_of(DeviceId d) { return static_cast<int>(d.value()) + 1; }
int compute_tid(const Cluster& c, DeviceId d) {
  return 1 + static_cast<int>(d.value() * (c.num_devices() + 1));
}
int link_tid(const Cluster& c, DeviceId from, DeviceId to) {
  return compute_tid(c, to) + static_cast<int>(from.value()) + 1;
}

Json metadata(const char* what, int pid, int tid, Json args) {
  return Json{{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

Json trace_to_json(const Graph& graph, const Cluster& cluster, const SimResult& result) {
  DPLACE_CHECK(result.ops.size() == graph.num_ops())
      << "trace needs a timeline (SimOptions::record_timeline): " << result.ops.size()
      << " op timings for " << graph.num_ops() << " ops";
  Json events = Json::array();

  // Names and order of the tracks.
  for (size_t i = 0; i < cluster.num_devices(); ++i) {
    const DeviceId d = DeviceId::from_index(i);
    const int pid = pid_of(d);
    const Device& device = cluster.device(d);
    const int compute = compute_tid(cluster, d);
    events.push_back(metadata("process_name", pid, compute, {{"name", device.name}}));
    events.push_back(metadata("process_sort_index", pid, compute, {{"sort_index", i}}));
    events.push_back(metadata("thread_name", pid, compute, {{"name", "compute"}}));
    events.push_back(metadata("thread_sort_index", pid, compute, {{"sort_index", 0}}));
    for (size_t j = 0; j < cluster.num_devices(); ++j) {
      const DeviceId from = DeviceId::from_index(j);
      if (from == d || cluster.link(from, d) == nullptr) continue;
      const int tid = link_tid(cluster, from, d);
      events.push_back(
          metadata("thread_name", pid, tid, {{"name", "from " + cluster.device(from).name}}));
      events.push_back(metadata("thread_sort_index", pid, tid, {{"sort_index", j + 1}}));
    }
  }

  for (size_t i = 0; i < graph.num_ops(); ++i) {
    const OpTiming& t = result.ops[i];
    DPLACE_CHECK(t.device.valid() && t.device.value() < cluster.num_devices())
        << "op " << i << " has no device in the timeline";
    const Op& op = graph.op(OpId::from_index(i));
    Json args = {{"op", i}};
    if (!op.type.empty()) args["type"] = op.type;
    if (op.phase != Phase::kUnspecified) args["phase"] = std::string(phase_name(op.phase));
    events.push_back(Json{{"name", op.name},
                          {"cat", "op"},
                          {"ph", "X"},
                          {"pid", pid_of(t.device)},
                          {"tid", compute_tid(cluster, t.device)},
                          {"ts", t.start_s * kMicrosPerSecond},
                          {"dur", (t.end_s - t.start_s) * kMicrosPerSecond},
                          {"args", std::move(args)}});
  }

  for (const TransferTiming& t : result.transfers) {
    const std::string tensor = fmt::format("{}:{}", graph.op(t.tensor.op).name, t.tensor.output);
    events.push_back(Json{{"name", tensor},
                          {"cat", "transfer"},
                          {"ph", "X"},
                          {"pid", pid_of(t.to)},
                          {"tid", link_tid(cluster, t.from, t.to)},
                          {"ts", t.start_s * kMicrosPerSecond},
                          {"dur", (t.end_s - t.start_s) * kMicrosPerSecond},
                          {"args",
                           {{"tensor", tensor},
                            {"bytes", t.bytes},
                            {"from", cluster.device(t.from).name},
                            {"to", cluster.device(t.to).name}}}});
  }

  return Json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"graph", graph.name()},
                {"cluster", cluster.name()},
                {"step_time_s", result.step_time_s},
                {"feasible", result.feasible}}}};
}

void write_trace_file(const Graph& graph, const Cluster& cluster, const SimResult& result,
                      const std::string& path) {
  const Json doc = trace_to_json(graph, cluster, result);
  std::ostringstream out;
  // One event per line: readable, and still valid JSON for the trace viewers.
  out << "{\"displayTimeUnit\": \"ms\",\n\"otherData\": " << doc.at("otherData").dump()
      << ",\n\"traceEvents\": [";
  const Json& events = doc.at("traceEvents");
  for (size_t i = 0; i < events.size(); ++i) out << (i == 0 ? "\n" : ",\n") << events[i].dump();
  out << "\n]}\n";
  if (const std::string why = write_file_whole(path, out.view()); !why.empty()) {
    throw FormatError(fmt::format("{}: cannot write file ({})", path, why));
  }
}

}  // namespace dplace
