#include "dplace/core/files.h"

#include <filesystem>

#include "dplace/core/error.h"

namespace dplace {

void reject_directory(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw FormatError(path + ": is a directory, not a file");
  }
}

}  // namespace dplace
