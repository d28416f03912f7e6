// Checks on input paths shared by every reader (graphs, clusters, placements, profiles).
//
// Thread safety: pure functions.
#pragma once

#include <string>

namespace dplace {

// Throws FormatError "<path>: is a directory, not a file" when `path` names a directory. A
// std::ifstream opens a directory without complaint on Linux and then reads nothing, so without
// this check a directory was reported as an empty file.
void reject_directory(const std::string& path);

}  // namespace dplace
