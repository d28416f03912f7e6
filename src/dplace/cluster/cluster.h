// A cluster: devices (CPU sockets, GPUs, accelerators) and the directed links between them.
//
// Link resolution: link(a, b) for a != b is the explicit entry for a->b if the cluster file has one
// (an undirected entry counts for both directions), else the cluster's default link, else absent
// (nullptr), in which case a placement that moves a tensor from a to b is invalid. Every resolved
// (a, b) pair is its own FIFO channel in the simulator.
//
// Thread safety: immutable after construction; safe to share.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dplace/core/ids.h"
#include "dplace/core/json.h"

namespace dplace {

enum class DeviceKind : uint8_t { kCpu, kGpu, kAccel };

std::string_view device_kind_name(DeviceKind kind);  // "cpu", "gpu", "accel"
std::optional<DeviceKind> parse_device_kind(std::string_view word);

struct Device {
  std::string name;  // e.g. "/gpu:0"
  DeviceKind kind = DeviceKind::kCpu;
  double peak_flops = 0;                 // FLOP/s at peak (a multiply-add counts 2)
  double mem_bandwidth_bytes_per_s = 0;  // device memory bandwidth
  int64_t memory_bytes = 0;              // capacity available to the step
  double op_overhead_s = 0;              // fixed launch/dispatch cost per op with work
  // Fraction of peak_flops reached per op type; "default" is used for unlisted types, 1.0 if
  // absent.
  std::vector<std::pair<std::string, double>> efficiency;
  std::string description;  // free text: model, where the figures come from

  // efficiency[type] or efficiency["default"] or 1.
  double efficiency_for(std::string_view op_type) const;
};

struct Link {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
  friend bool operator==(const Link&, const Link&) = default;
};

struct LinkSpec {
  std::string from;
  std::string to;
  Link link;
  bool directed = false;  // false: the entry is both directions
};

// An ordered pair of devices.
struct DevicePair {
  DeviceId from;
  DeviceId to;
};

struct ClusterSpec {
  std::string name;
  std::string source;  // where the figures come from (vendor sheets, papers)
  std::vector<Device> devices;
  std::vector<LinkSpec> links;
  std::optional<Link> default_link;
};

// What moving a tensor between two devices costs on average, before the devices are known: the mean
// latency and the mean of 1 / bandwidth over every resolved link a->b with a != b (both 0 when
// there is none). List schedulers charge it to an edge when they rank ops (HEFT's upward rank,
// SCT's LP).
struct MeanLinkCost {
  int links = 0;  // resolved links between distinct devices
  double latency_s = 0;
  double seconds_per_byte = 0;
  double transfer_s(int64_t bytes) const {
    return latency_s + static_cast<double>(bytes) * seconds_per_byte;
  }
};

// The most devices a cluster may have. The simulator and the placers keep state per ordered
// device pair, so 1,024 devices are a million channels; op-level placement across more devices
// than that is not a use dplace serves.
inline constexpr size_t kMaxDevices = 1024;

class Cluster {
 public:
  Cluster() = default;
  // Validates and resolves links. `origin` (a file path or "preset NAME") names the cluster in
  // errors. Throws ConfigError for: no devices or more than kMaxDevices, a duplicate or empty
  // device name, a non-positive peak_flops / bandwidth / memory, an efficiency outside (0, 1], a
  // link naming an unknown device or joining a device to itself, a non-positive link bandwidth or
  // negative latency.
  Cluster(ClusterSpec spec, const std::string& origin);

  const std::string& name() const { return spec_.name; }
  const std::string& source() const { return spec_.source; }
  const ClusterSpec& spec() const { return spec_; }

  size_t num_devices() const { return spec_.devices.size(); }
  const Device& device(DeviceId id) const { return spec_.devices[id.value()]; }
  std::span<const Device> devices() const { return spec_.devices; }
  std::optional<DeviceId> find_device(std::string_view name) const;
  // Devices of one kind, in cluster order.
  std::vector<DeviceId> devices_of_kind(DeviceKind kind) const;
  // Whether `key` (of an op's time_s or devices) names a device of the cluster or a kind it has.
  bool has_device_or_kind(std::string_view key) const;

  // The link a->b (see the file comment), or nullptr. REQUIRES: a != b.
  const Link* link(DeviceId from, DeviceId to) const {
    const size_t k = from.value() * num_devices() + to.value();
    return has_link_[k] ? &links_[k] : nullptr;
  }
  // The first pair (from != to, by from then to) with no link; nullopt when every pair has one.
  std::optional<DevicePair> first_unlinked_pair() const;
  MeanLinkCost mean_link_cost() const;
  // Index of the (from, to) channel in [0, num_devices^2); used by the simulator.
  size_t channel_index(DeviceId from, DeviceId to) const {
    return from.value() * num_devices() + to.value();
  }

 private:
  ClusterSpec spec_;
  std::vector<Link> links_;        // num_devices^2, row = from
  std::vector<uint8_t> has_link_;  // num_devices^2
};

}  // namespace dplace
