// Measured op times from onnxruntime's profiler (`SessionOptions.enable_profiling`), for
// `--profile FILE[=DEVICE]`: each node's measured time becomes the graph op's `time_s` on the
// device kind the node ran on, overriding the cost model there (cost/cost_model.h).
//
// The file is the JSON array of trace events onnxruntime writes (or an object holding it under
// "traceEvents"). Only node events are read: "cat": "Node", "name": "<node>_kernel_time", "dur" in
// microseconds, "args.provider" the execution provider; one such event per node and session run.
// A node's time is the median of its runs. Its op is the graph op of the same name: onnxruntime
// names a node as the ONNX importer does (the node's name, else "<OpType>_<index>").
//
// Device: each provider maps to a device kind (CPUExecutionProvider and the other CPU providers:
// "cpu"; CUDA, ROCm, TensorRT, MIGraphX, DirectML, WebGPU: "gpu"). `device`, when given, is a
// device name or kind that takes the times of every provider not in the CPU list, or of all of
// them in a profile with CPU providers only. A provider dplace cannot map needs `device`.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dplace/ir/graph.h"

namespace dplace {

// One --profile argument: FILE, or FILE=DEVICE.
struct ProfileSpec {
  std::string path;
  std::string device;  // empty: the device kind of each node's provider
};

// The whole text when it names an existing file; otherwise "FILE=DEVICE" split at the last '='.
// Throws ConfigError for an empty file or device.
ProfileSpec parse_profile_spec(const std::string& text);

// One profiled node: where it ran and how long each of its runs took.
struct ProfiledNode {
  std::string name;    // the node's name in the profile
  std::string device;  // the device name or kind its times are for
  std::string provider;
  std::vector<double> run_seconds;                    // one per run, in file order
  std::optional<std::vector<int64_t>> output0_shape;  // onnxruntime's first output, if it gave one
};

struct OrtProfile {
  std::string path;
  std::string spec_device;          // ProfileSpec::device
  std::vector<ProfiledNode> nodes;  // in order of first appearance; (name, device) unique
};

// Reads and checks a profile. Throws FormatError naming the file, and the event by its index and
// name, for a file that is missing, not JSON, not an array of trace events, or has a node event
// without a usable duration; ConfigError for a profile without node events, or with a provider
// whose device kind cannot be told and no spec.device.
OrtProfile read_ort_profile(const ProfileSpec& spec);

// The median of a node's runs: the middle run, or the mean of the two middle ones.
// REQUIRES: !run_seconds.empty().
double median_seconds(std::vector<double> run_seconds);

struct MeasuredGraph {
  Graph graph;                        // the input graph with the measured times set
  std::vector<std::string> warnings;  // one line each
  // The devices (names or kinds) that received times, per profile: (path, device, explicit).
  struct Target {
    std::string path;
    std::string device;
    bool from_spec = false;  // given as FILE=DEVICE
  };
  std::vector<Target> targets;
};

// Sets each profiled op's time_s on its device to the median of its runs (replacing a time the
// graph had there). Warns, one line per profile, about profiled nodes that are no op of the graph,
// forward ops with work that the profile does not time, first outputs whose shape differs
// from the graph's `output_shapes` (a profile run at other input sizes), and nodes with fewer than
// three runs. Throws ConfigError when no node of a profile names an op of the graph, and when two
// profiles time the same op on the same device.
MeasuredGraph apply_ort_profiles(const Graph& graph, const std::vector<OrtProfile>& profiles);

}  // namespace dplace
