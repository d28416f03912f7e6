#include "dplace/core/format.h"

#include <fmt/format.h>

#include <cmath>

namespace dplace {

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return "inf";
  if (seconds >= 1) return fmt::format("{:.4g} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.4g} ms", seconds * 1e3);
  return fmt::format("{:.4g} us", seconds * 1e6);
}

}  // namespace dplace
