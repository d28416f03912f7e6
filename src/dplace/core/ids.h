// Strong integer ids: OpId, DeviceId, GroupId are distinct types, so an op index can
// never be passed where a device index is expected. Each wraps a dense uint32 index into the
// owning container (Graph ops, Cluster devices, Graph groups).
//
// Thread safety: plain values.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace dplace {

template <typename Tag>
class StrongId {
 public:
  static constexpr uint32_t kInvalidValue = std::numeric_limits<uint32_t>::max();

  constexpr StrongId() = default;
  constexpr explicit StrongId(uint32_t value) : value_(value) {}
  // Convenience for loop indices of other integer types. REQUIRES: 0 <= value < 2^32 - 1.
  template <typename Int>
  static constexpr StrongId from_index(Int index) {
    return StrongId(static_cast<uint32_t>(index));
  }

  constexpr uint32_t value() const { return value_; }
  constexpr bool valid() const { return value_ != kInvalidValue; }
  static constexpr StrongId invalid() { return StrongId(); }

  friend constexpr auto operator<=>(StrongId a, StrongId b) = default;

 private:
  uint32_t value_ = kInvalidValue;
};

struct OpTag {};
struct DeviceTag {};
struct GroupTag {};

using OpId = StrongId<OpTag>;
using DeviceId = StrongId<DeviceTag>;
using GroupId = StrongId<GroupTag>;

}  // namespace dplace

template <typename Tag>
struct std::hash<dplace::StrongId<Tag>> {
  size_t operator()(dplace::StrongId<Tag> id) const noexcept {
    return std::hash<uint32_t>()(id.value());
  }
};
