// A hard wall-clock limit for work that does not stop at its own: run_forked() runs a function in a
// child process (fork) and kills the child when it is still running at the deadline.
//
// For third-party solvers whose time limits are only checked between steps they cannot interrupt:
// CBC's root LP solve and Clp's presolve overran a 10-second limit by minutes on large graphs
// (docs/pipeline.md, docs/placers.md). The child computes the same thing the caller would, on a
// copy-on-write image of the process, and sends back the bytes work() returns.
//
// The child is killed with the parent (PR_SET_PDEATHSIG; strictly, when the calling thread ends,
// which cannot happen while run_forked waits for it). When no pipe or no process can be made, the
// outcome is kNotStarted: callers do not then run the work in their own process, where the hard
// limit could not be kept.
//
// REQUIRES: work() needs nothing that another thread of the caller's process holds (the child
// has only the calling thread), and writes nothing the parent reads back except its return value.
// Thread safety: may be called from any thread; each call forks once.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "dplace/core/error.h"

namespace dplace {

struct ForkedRun {
  enum class Outcome {
    kFinished,    // work() returned; `output` holds its bytes
    kTimedOut,    // still running at the deadline: killed
    kNotStarted,  // no pipe or no fork (the system refused the resource): `problem` says which
    kFailed,      // the child died (a crash, an exception): `problem` says how
  };
  Outcome outcome = Outcome::kFailed;
  std::string output;
  std::string problem;
};

ForkedRun run_forked(const std::function<std::string()>& work,
                     std::chrono::steady_clock::time_point deadline);

// The deadline for a solver given a time limit it may overrun: time_limit_s from now plus a grace
// period of max(kOverrunMinGraceSeconds, kOverrunGraceFactor * time_limit_s), in which a solver
// that does check its clock stops by itself.
inline constexpr double kOverrunGraceFactor = 0.1;
inline constexpr double kOverrunMinGraceSeconds = 2;
inline std::chrono::steady_clock::time_point overrun_deadline(double time_limit_s) {
  const double seconds =
      time_limit_s + std::max(kOverrunMinGraceSeconds, kOverrunGraceFactor * time_limit_s);
  return std::chrono::steady_clock::now() + steady_seconds(seconds);
}

// A result's fields as bytes, for a child of the same binary to send to its parent: values of
// trivially copyable types, and vectors of them (length first), read back in the order written.
class ByteWriter {
 public:
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  template <typename T>
  void put(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    put(static_cast<uint64_t>(values.size()));
    bytes_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }
  void put(const std::string& text) { put(std::vector<char>(text.begin(), text.end())); }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  void get(T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    take(&value, sizeof value);
  }
  template <typename T>
  void get(std::vector<T>& values) {
    uint64_t size = 0;
    get(size);
    DPLACE_CHECK(size <= (bytes_.size() - offset_) / sizeof(T)) << "truncated result bytes";
    values.resize(size);
    take(values.data(), size * sizeof(T));
  }
  void get(std::string& text) {
    std::vector<char> chars;
    get(chars);
    text.assign(chars.begin(), chars.end());
  }
  bool at_end() const { return offset_ == bytes_.size(); }

 private:
  void take(void* out, size_t n) {
    DPLACE_CHECK(n <= bytes_.size() - offset_) << "truncated result bytes";
    if (n > 0) std::memcpy(out, bytes_.data() + offset_, n);
    offset_ += n;
  }
  const std::string& bytes_;
  size_t offset_ = 0;
};

}  // namespace dplace
