#include "dplace/placers/learning/curve_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "dplace/core/error.h"

namespace dplace {

void throw_cannot_write_curve(const std::string& path) {
  // A failed close or flush may leave errno unset.
  throw ConfigError(fmt::format("--param curve={}: cannot write the file: {}", path,
                                errno != 0 ? std::strerror(errno) : "write failed"));
}

void write_curve_header(const std::string& path, std::string_view header) {
  errno = 0;
  std::ofstream out(path, std::ios::trunc);
  out << header << '\n';
  out.close();
  if (!out) throw_cannot_write_curve(path);
}

void append_curve_row(const std::string& path, std::string_view row) {
  errno = 0;
  std::ofstream out(path, std::ios::app);
  if (!out) throw_cannot_write_curve(path);
  out << row << '\n';
  out.close();
  if (!out) throw_cannot_write_curve(path);
}

}  // namespace dplace
