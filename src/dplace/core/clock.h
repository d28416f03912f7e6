// Wall-clock time for budgets and reports: the monotonic clock every placer measures with.
//
// Thread safety: pure functions.
#pragma once

#include <chrono>

namespace dplace {

using Clock = std::chrono::steady_clock;

// Seconds from `start` to now.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace dplace
