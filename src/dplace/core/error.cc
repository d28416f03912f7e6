#include "dplace/core/error.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace dplace {

void check_limit_seconds(const std::string& option, double seconds) {
  if (!(seconds > 0 && seconds <= kMaxLimitSeconds)) {
    throw ConfigError(fmt::format("{} {}: expected a number of seconds in (0, {}]", option, seconds,
                                  kMaxLimitSeconds));
  }
}

}  // namespace dplace

namespace dplace::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << "dplace internal error: check failed at " << file << ":" << line << ": " << condition
          << " ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "%s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace dplace::internal
