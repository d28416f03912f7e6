// Human-readable durations for tables, notes and progress lines.
//
// Thread safety: pure functions.
#pragma once

#include <string>

namespace dplace {

// Four significant digits in the largest unit that keeps the value >= 1 (down to microseconds):
// "1.234 s", "12.3 ms", "45.6 us"; "inf" for an infinite or NaN value.
std::string format_seconds(double seconds);

}  // namespace dplace
