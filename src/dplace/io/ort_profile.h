// Measured op times from onnxruntime's profiler (`SessionOptions.enable_profiling`), for
// `--profile FILE[=DEVICE]`: each node's measured time becomes the graph op's `time_s` on the
// device kind the node ran on, overriding the cost model there (cost/cost_model.h).
//
// The file is the JSON array of trace events onnxruntime writes (or an object holding it under
// "traceEvents"). Only node events are read: "cat": "Node", "name": "<node>_kernel_time", "dur" in
// whole microseconds, "args" with the execution provider, the op type and the node's index; one
// such event per node and session run. A node's time is the median of its runs. Its op is the graph
// op onnxruntime's name denotes: the op of that name, or the op whose `onnxruntime_name` it is (the
// ONNX importer records it where the two differ: onnxruntime numbers unnamed nodes
// "<OpType>_<index>" without counting Constant nodes) and whose type is the node's.
//
// Device: each provider maps to a device kind (CPUExecutionProvider and the other CPU providers:
// "cpu"; CUDA, ROCm, TensorRT, MIGraphX, DirectML, WebGPU: "gpu"). `device`, when given, is a
// device name or kind that takes the times of every provider not in the CPU list, or of all of
// them in a profile with CPU providers only. A provider dplace cannot map needs `device`. The CPU
// nodes of a profile that also has accelerator nodes are its CPU fallback: a CPU profile's time for
// the same op wins over theirs.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dplace/cluster/cluster.h"
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
  std::string name;     // the node's name in the profile
  std::string op_type;  // args.op_name; empty when the profile gives none
  std::string device;   // the device name or kind its times are for
  std::string provider;
  bool cpu_fallback = false;  // a CPU node of a profile that also has accelerator nodes
  // Events of this name came from more than one node (args.node_index or op_name differs, on any
  // provider): onnxruntime does not make node names unique, so the name cannot say which op a
  // time is for. (The ONNX importer gives the second of two equal names a suffix and records the
  // plain name as its onnxruntime_name, which would send both nodes' times to it: the name is
  // ambiguous here first.)
  bool ambiguous = false;
  std::vector<double> run_times_s;                    // one per run, in file order
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
// REQUIRES: !run_times_s.empty().
double median_s(std::vector<double> run_times_s);

// What only the cluster can check: which devices the profiles timed, and where the graph file's
// own times for device names may win over a profile's kind (check_profiles_on_cluster).
struct ProfilesOnGraph {
  // The devices (names or kinds) that received times, per profile.
  struct Target {
    std::string path;
    std::string device;
    bool from_spec = false;     // given as FILE=DEVICE
    bool cpu_fallback = false;  // times of the CPU nodes of an accelerator profile only
    std::vector<OpId> ops;      // the ops it timed there, ascending
  };
  std::vector<Target> targets;
  // An op a profile timed on a kind, for which the graph file already gave a time for a device
  // name: if that device is of the kind, its time wins there (cost/cost_model.h).
  struct NamedTime {
    std::string path;
    OpId op;
    std::string kind;
    std::string device_name;
  };
  std::vector<NamedTime> named_times;
};

struct MeasuredGraph {
  Graph graph;                        // the input graph with the measured times set
  std::vector<std::string> warnings;  // one line each
  ProfilesOnGraph profiles;
};

// Sets each profiled op's time_s on its device to the median of its runs (replacing a time the
// graph had there). Warns, one line each, about profiled nodes that are no op of the graph, nodes
// whose name is ambiguous or whose type differs from their op's, forward ops with work that have
// no measured time at all, first outputs whose shape differs from the graph's
// `output_shapes` (a profile run at other input sizes), and nodes with fewer than three runs.
// Throws ConfigError when no node of a profile times an op of the graph, and when two profiles time
// the same op on the same device (CPU fallback times aside, see above).
MeasuredGraph apply_ort_profiles(const Graph& graph, const std::vector<OrtProfile>& profiles);

// The checks of apply_ort_profiles' result that need the cluster. Throws ConfigError for a
// FILE=DEVICE whose device or kind the cluster lacks, and for an op that one profile times on a
// kind and another on a device of that kind (a CPU fallback's time on kind cpu gives way, as
// above). Returns a warning, one line per profile, for ops whose graph-file time for a device of
// the kind the profile times wins over the profile's.
std::vector<std::string> check_profiles_on_cluster(const ProfilesOnGraph& profiles,
                                                   const Graph& graph, const Cluster& cluster);

}  // namespace dplace
