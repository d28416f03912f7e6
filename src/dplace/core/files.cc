#include "dplace/core/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "dplace/core/error.h"

namespace dplace {

namespace fs = std::filesystem;

std::string path_status_problem(const std::string& path) {
  std::error_code ec;
  static_cast<void>(fs::status(path, ec));
  if (!ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
    return "";
  }
  return ec.message();
}

void check_input_path(const std::string& path) {
  if (const std::string problem = path_status_problem(path); !problem.empty()) {
    throw FormatError(path + ": cannot open: " + problem);
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw FormatError(path + ": is a directory, not a file");
}

namespace {

// Writes all of `bytes` to `fd`; false with errno set on failure.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

namespace {

// Truncates `target` and writes `bytes` to it; "" or the reason.
std::string write_in_place(const fs::path& target, std::string_view bytes) {
  const int fd = ::open(target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return errno_text();
  const bool written = write_all(fd, bytes);
  const std::string why = written ? "" : errno_text();
  const bool closed = ::close(fd) == 0;
  return !written ? why : closed ? "" : errno_text();
}

}  // namespace

std::string write_file_whole(const std::string& path, std::string_view bytes) {
  std::error_code ec;
  fs::path target = path;
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    target = fs::weakly_canonical(target, ec);
    if (ec) return ec.message();
  }
  const fs::file_status status = fs::status(target, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return ec.message();
  if (fs::is_directory(status)) return "it is a directory";
  // A device or a FIFO: there is nothing to replace, only something to write to.
  if (fs::exists(status) && !fs::is_regular_file(status)) return write_in_place(target, bytes);

  static std::atomic<uint64_t> counter{0};
  const std::string temporary =
      fmt::format("{}.tmp-{}-{}", target.string(), ::getpid(), counter.fetch_add(1));
  // 0666 less the umask, as for a file the writer creates; an existing file keeps its permissions.
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    // A file the user may write in a directory where they may not create one: written in place,
    // as before (not whole, but not refused).
    const bool no_new_file = errno == EACCES || errno == EPERM || errno == EROFS;
    if (no_new_file && fs::exists(status)) return write_in_place(target, bytes);
    return errno_text();
  }
  bool ok = true;
  if (fs::exists(status)) {
    ok = ::fchmod(fd, static_cast<mode_t>(status.permissions()) & 07777) == 0;
  }
  ok = ok && write_all(fd, bytes);
  std::string why = ok ? "" : errno_text();
  if (::close(fd) != 0 && ok) {  // NFS and quotas may report a failed write only here
    ok = false;
    why = errno_text();
  }
  if (ok && ::rename(temporary.c_str(), target.c_str()) != 0) {
    ok = false;
    why = errno_text();
  }
  if (!ok) ::unlink(temporary.c_str());
  return why;
}

}  // namespace dplace
