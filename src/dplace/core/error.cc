#include "dplace/core/error.h"

#include <cstdio>
#include <cstdlib>

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
