#include "dplace/cluster/cluster.h"

#include <fmt/format.h>

#include <cmath>
#include <unordered_set>

#include "dplace/core/error.h"
#include "dplace/core/format.h"

namespace dplace {

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kGpu:
      return "gpu";
    case DeviceKind::kAccel:
      return "accel";
  }
  return "?";
}

std::optional<DeviceKind> parse_device_kind(std::string_view word) {
  if (word == "cpu") return DeviceKind::kCpu;
  if (word == "gpu") return DeviceKind::kGpu;
  if (word == "accel") return DeviceKind::kAccel;
  return std::nullopt;
}

double Device::efficiency_for(std::string_view op_type) const {
  const double* fallback = nullptr;
  for (const auto& [type, eff] : efficiency) {
    if (type == op_type) return eff;
    if (type == "default") fallback = &eff;
  }
  return fallback ? *fallback : 1.0;
}

namespace {

bool positive_finite(double x) { return std::isfinite(x) && x > 0; }

// Physically meaningful ranges, far wider than any hardware: values outside them (1e-300 bytes/s,
// 1e100 FLOP/s) only make times overflow to infinity or underflow to zero.
constexpr double kMinRate = 1;       // FLOP/s or bytes/s
constexpr double kMaxRate = 1e21;    // a million times today's fastest device or link
constexpr double kMaxSeconds = 1e3;  // a link latency or per-op overhead

void require_rate(double x, const std::string& origin, const std::string& what, const char* field) {
  if (!positive_finite(x)) {
    throw ConfigError(
        fmt::format("{}: {}: field '{}': must be positive, got {}", origin, what, field, x));
  }
  if (x < kMinRate || x > kMaxRate) {
    throw ConfigError(fmt::format("{}: {}: field '{}': {} is outside the supported range [{}, {}]",
                                  origin, what, field, x, kMinRate, kMaxRate));
  }
}

void require_seconds(double x, const std::string& origin, const std::string& what,
                     const char* field) {
  if (!std::isfinite(x) || x < 0) {
    throw ConfigError(
        fmt::format("{}: {}: field '{}': must be non-negative, got {}", origin, what, field, x));
  }
  if (x > kMaxSeconds) {
    throw ConfigError(fmt::format("{}: {}: field '{}': {} is outside the supported range [0, {}]",
                                  origin, what, field, x, kMaxSeconds));
  }
}

void check_link(const Link& link, const std::string& origin, const std::string& what) {
  require_rate(link.bandwidth_bytes_per_s, origin, what, "bandwidth_bytes_per_s");
  require_seconds(link.latency_s, origin, what, "latency_s");
}

}  // namespace

Cluster::Cluster(ClusterSpec spec, const std::string& origin) : spec_(std::move(spec)) {
  const size_t n = spec_.devices.size();
  if (n == 0) throw ConfigError(fmt::format("{}: field 'devices': cluster has no devices", origin));
  if (n > kMaxDevices) {
    throw ConfigError(fmt::format("{}: field 'devices': {} devices, more than the limit of {}",
                                  origin, n, kMaxDevices));
  }
  if (has_control_character(spec_.name)) {
    throw ConfigError(fmt::format(
        "{}: cluster name '{}' contains a control character (a line break, tab or other)", origin,
        escape_control_characters(spec_.name)));
  }
  std::unordered_set<std::string> names;
  for (const Device& d : spec_.devices) {
    const std::string what = fmt::format("device '{}'", d.name);
    if (d.name.empty()) throw ConfigError(fmt::format("{}: a device has an empty name", origin));
    if (has_control_character(d.name)) {
      throw ConfigError(fmt::format(
          "{}: device '{}': the name contains a control character (a line break, tab or other)",
          origin, escape_control_characters(d.name)));
    }
    if (!names.insert(d.name).second) {
      throw ConfigError(fmt::format("{}: {}: duplicate device name", origin, what));
    }
    require_rate(d.peak_flops, origin, what, "peak_flops");
    require_rate(d.mem_bandwidth_bytes_per_s, origin, what, "mem_bandwidth_bytes_per_s");
    if (d.memory_bytes <= 0) {
      throw ConfigError(fmt::format("{}: {}: field 'memory_bytes': must be positive, got {}",
                                    origin, what, d.memory_bytes));
    }
    require_seconds(d.op_overhead_s, origin, what, "op_overhead_s");
    for (const auto& [type, eff] : d.efficiency) {
      if (!(eff > 0 && eff <= 1)) {
        throw ConfigError(fmt::format("{}: {}: field 'efficiency.{}': must be in (0, 1], got {}",
                                      origin, what, type, eff));
      }
    }
  }

  links_.assign(n * n, Link{});
  has_link_.assign(n * n, 0);
  if (spec_.default_link) {
    check_link(*spec_.default_link, origin, "default_link");
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) {
        if (a == b) continue;
        links_[a * n + b] = *spec_.default_link;
        has_link_[a * n + b] = 1;
      }
    }
  }
  std::vector<uint8_t> given(n * n, 0);  // directions set by a links entry
  for (const LinkSpec& l : spec_.links) {
    const std::string what = fmt::format("link '{}' -> '{}'", l.from, l.to);
    auto from = find_device(l.from);
    auto to = find_device(l.to);
    if (!from) throw ConfigError(fmt::format("{}: {}: unknown device '{}'", origin, what, l.from));
    if (!to) throw ConfigError(fmt::format("{}: {}: unknown device '{}'", origin, what, l.to));
    if (*from == *to)
      throw ConfigError(fmt::format("{}: {}: joins a device to itself", origin, what));
    check_link(l.link, origin, what);
    // Each direction may be given by one entry only: a second one used to replace the first
    // without a word (default_link, by contrast, is meant to be overridden).
    auto set = [&](DeviceId a, DeviceId b) {
      const size_t at = a.value() * n + b.value();
      if (given[at]) {
        throw ConfigError(fmt::format(
            "{}: {}: the direction '{}' -> '{}' is already given by an earlier links entry", origin,
            what, device(a).name, device(b).name));
      }
      given[at] = 1;
      links_[at] = l.link;
      has_link_[at] = 1;
    };
    set(*from, *to);
    if (!l.directed) set(*to, *from);
  }
}

std::optional<DevicePair> Cluster::first_unlinked_pair() const {
  for (size_t a = 0; a < num_devices(); ++a) {
    for (size_t b = 0; b < num_devices(); ++b) {
      const DeviceId from = DeviceId::from_index(a), to = DeviceId::from_index(b);
      if (a != b && link(from, to) == nullptr) return DevicePair{from, to};
    }
  }
  return std::nullopt;
}

MeanLinkCost Cluster::mean_link_cost() const {
  MeanLinkCost mean;
  for (size_t a = 0; a < num_devices(); ++a) {
    for (size_t b = 0; b < num_devices(); ++b) {
      if (a == b) continue;
      if (const Link* l = link(DeviceId::from_index(a), DeviceId::from_index(b))) {
        mean.latency_s += l->latency_s;
        mean.seconds_per_byte += 1.0 / l->bandwidth_bytes_per_s;
        ++mean.links;
      }
    }
  }
  if (mean.links > 0) {
    mean.latency_s /= mean.links;
    mean.seconds_per_byte /= mean.links;
  }
  return mean;
}

std::optional<DeviceId> Cluster::find_device(std::string_view name) const {
  for (size_t i = 0; i < spec_.devices.size(); ++i) {
    if (spec_.devices[i].name == name) return DeviceId::from_index(i);
  }
  return std::nullopt;
}

bool Cluster::has_device_or_kind(std::string_view key) const {
  const std::optional<DeviceKind> kind = parse_device_kind(key);
  for (const Device& d : spec_.devices) {
    if (d.name == key || (kind && d.kind == *kind)) return true;
  }
  return false;
}

std::vector<DeviceId> Cluster::devices_of_kind(DeviceKind kind) const {
  std::vector<DeviceId> out;
  for (size_t i = 0; i < spec_.devices.size(); ++i) {
    if (spec_.devices[i].kind == kind) out.push_back(DeviceId::from_index(i));
  }
  return out;
}

}  // namespace dplace
