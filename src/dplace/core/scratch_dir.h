// Test support: one private scratch directory per test process.
//
// scratch_path("x.json") is <system temp dir>/dplace-test-<pid>-XXXXXX/x.json. The directory is
// made (mkdtemp, mode 0700) on first use and removed with everything in it when the process exits
// normally, so a test run leaves nothing behind in /tmp and two runs never share files. A process
// that dies (a crash, a death test's child) leaves its directory; a forked child that returns
// through _exit() (core/run_forked.h) does not remove its parent's.
//
// Thread safety: the directory is made once (a function-local static); the functions may be
// called from any thread.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace dplace {

namespace scratch_detail {

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() /
                           ("dplace-test-" + std::to_string(::getpid()) + "-XXXXXX"))
                              .string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("cannot make a scratch directory from " + pattern);
    }
    path_ = pattern;
    owner_pid_ = ::getpid();
  }
  ~ScratchDir() {
    if (::getpid() != owner_pid_) return;  // a forked child exiting normally
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  pid_t owner_pid_ = 0;
};

}  // namespace scratch_detail

// The process's scratch directory (made on the first call).
inline const std::filesystem::path& scratch_dir() {
  static const scratch_detail::ScratchDir dir;
  return dir.path();
}

// A path inside scratch_dir(); the file is not created.
inline std::string scratch_path(std::string_view name) {
  return (scratch_dir() / std::filesystem::path(name)).string();
}

}  // namespace dplace
