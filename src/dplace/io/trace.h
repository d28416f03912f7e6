// Chrome trace-event JSON for a simulated step (opens in Perfetto, ui.perfetto.dev, and in
// chrome://tracing). Layout:
//  * one process per device (pid = device index + 1, named after the device, in cluster order);
//  * a thread "compute" carrying the device's ops, then one thread per incoming link
//    "from <device>" carrying the transfers into this device; a thread is listed for every link
//    the cluster has into the device. Thread ids are unique across the whole trace and non-zero
//    (Perfetto treats tids as global): device d's compute thread is 1 + d * (n + 1), and its link
//    thread from device s is that plus s + 1, for n devices.
// Every op and transfer is a complete event ("ph": "X") with `ts` and `dur` in microseconds; op
// events have args {type, phase, op index}, transfer events {tensor, bytes, from, to}. The document
// is {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {graph, cluster, step_time_s}}.
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "dplace/cluster/cluster.h"
#include "dplace/core/json.h"
#include "dplace/ir/graph.h"
#include "dplace/sim/simulator.h"

namespace dplace {

// REQUIRES: `result` was recorded with SimOptions::record_timeline for this graph and cluster
// (result.ops.size() == graph.num_ops(); checked).
Json trace_to_json(const Graph& graph, const Cluster& cluster, const SimResult& result);
// Throws FormatError naming `path` when it cannot be written.
void write_trace_file(const Graph& graph, const Cluster& cluster, const SimResult& result,
                      const std::string& path);

}  // namespace dplace
