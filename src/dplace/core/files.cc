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

namespace {

std::string errno_text() { return std::strerror(errno); }

// Truncates `path` (creating it if need be) and writes `bytes` to it; "" or the reason.
std::string write_in_place(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return errno_text();
  const bool written = write_all(fd, bytes);
  const std::string why = written ? "" : errno_text();
  const bool closed = ::close(fd) == 0;
  return !written ? why : closed ? "" : errno_text();
}

// `path` with its symbolic links followed one by one (readlink, not realpath: the file a dangling
// link names is the one to create).
struct LinkTarget {
  std::string path;           // empty when the links loop or cannot be read
  bool through_proc = false;  // a hop was in /proc or /dev (/dev/stdout, /proc/self/fd/1)
};

LinkTarget link_target(const std::string& path) {
  LinkTarget out;
  fs::path target = path;
  for (int hops = 0; hops < 40; ++hops) {
    const std::string here = target.string();
    out.through_proc |= here.starts_with("/proc/") || here.starts_with("/dev/");
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(target, ec))) {
      out.path = here;
      return out;
    }
    const fs::path link = fs::read_symlink(target, ec);
    if (ec) return out;
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  return out;
}

// Errors of creating the new file, or of renaming it over the old one, after which the old file
// is written in place instead: a directory that refuses new files (permissions, a read-only file
// system), a name too long for the suffix, a sticky directory (/tmp) holding another user's file,
// a file that is a mount point (a container's single-file volume), another file system.
bool write_in_place_instead(int error) {
  return error == EACCES || error == EPERM || error == EROFS || error == ENAMETOOLONG ||
         error == EBUSY || error == EXDEV;
}

}  // namespace

std::string write_file_whole(const std::string& path, std::string_view bytes) {
  struct stat old {};
  const bool exists = ::stat(path.c_str(), &old) == 0;  // follows every link, /dev/stdout's too
  if (!exists && errno != ENOENT) return errno_text();
  if (exists && S_ISDIR(old.st_mode)) return "it is a directory";
  // A device, a FIFO or a pipe (/dev/null, /dev/stdout) has nothing to replace, only something to
  // write to; nor has what /proc's links name (/dev/stdout to a file: the report printed on
  // stdout would go to the replaced file). A file with other hard links keeps them.
  const LinkTarget link = link_target(path);
  if (link.path.empty()) return "cannot follow its symbolic links";
  if ((exists && (!S_ISREG(old.st_mode) || old.st_nlink > 1)) || link.through_proc) {
    return write_in_place(path, bytes);
  }
  const std::string& target = link.path;

  // A unique name beside the target: the pid and a counter, skipping names a killed run left.
  static std::atomic<uint64_t> counter{0};
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temporary = fmt::format("{}.tmp-{}-{}", target, ::getpid(), counter.fetch_add(1));
    // 0666 less the umask, as for a file the writer creates.
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    return write_in_place_instead(errno) ? write_in_place(path, bytes) : errno_text();
  }
  bool ok = true;
  if (exists) {  // the old file's owner and group (when allowed) and permissions
    static_cast<void>(::fchown(fd, old.st_uid, old.st_gid));
    ok = ::fchmod(fd, old.st_mode & 07777) == 0;
  }
  ok = ok && write_all(fd, bytes);
  std::string why = ok ? "" : errno_text();
  if (::close(fd) != 0 && ok) {  // NFS and quotas may report a failed write only here
    ok = false;
    why = errno_text();
  }
  if (ok && ::rename(temporary.c_str(), target.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    if (exists && write_in_place_instead(error)) return write_in_place(path, bytes);
    return std::strerror(error);
  }
  if (!ok) ::unlink(temporary.c_str());
  return why;
}

}  // namespace dplace
