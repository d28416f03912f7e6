// Error tiers.
//
//  * Bugs: DPLACE_CHECK(cond) << "message" is always on; DPLACE_DCHECK only in debug builds.
//    A failed check prints file:line and the message to stderr and aborts.
//  * Bad input or configuration: dplace::Error and its subclasses. The message is one line that
//    names the file (or source), the op or field, and what is wrong. Thrown by readers, builders
//    and option validation; caught only at the boundaries (the CLI turns it into exit status 2).
//  * A resource the system refused (memory, a thread, a process): std::bad_alloc,
//    std::system_error, or ResourceError where a command goes on without the resource and reports
//    the failure at its end; the CLI turns each into exit status 3.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>

namespace dplace {

// Base of every bad-input error. what() is the complete one-line message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A file could not be read or does not follow its format (JSON syntax, missing field, bad value).
class FormatError : public Error {
 public:
  using Error::Error;
};

// A graph is structurally invalid (cycle, unknown input, duplicate op, bad colocation).
class GraphError : public Error {
 public:
  using Error::Error;
};

// A cluster, placement or option is invalid for the graph it is used with.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A command finished what it could after the system refused a resource to part of it (compare:
// one placer ran out of host memory). what() is the complete one-line message.
class ResourceError : public std::runtime_error {
 public:
  explicit ResourceError(const std::string& message) : std::runtime_error(message) {}
};

// The longest wall-clock limit an option accepts, in seconds (about 11.6 days). Longer values,
// infinity among them, would overflow the steady clock when turned into a deadline.
inline constexpr double kMaxLimitSeconds = 1e6;

// `seconds` as a steady-clock duration, to add to a time point (a deadline). REQUIRES: finite and
// within the clock's range (kMaxLimitSeconds is).
inline std::chrono::steady_clock::duration steady_seconds(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

// Throws ConfigError "<option> <value>: expected a number of seconds in (0, 1000000]" unless
// 0 < seconds <= kMaxLimitSeconds (NaN fails). `option` names it as the user wrote it.
void check_limit_seconds(const std::string& option, double seconds);

namespace internal {

// Streams the message of a failed check, then aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `DPLACE_CHECK(c) << x` compile as a statement with a void type on both branches.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace internal
}  // namespace dplace

#define DPLACE_CHECK(condition)                 \
  (condition) ? (void)0                         \
              : ::dplace::internal::Voidify() & \
                    ::dplace::internal::CheckFailure(__FILE__, __LINE__, #condition)

#ifdef NDEBUG
#define DPLACE_DCHECK(condition) \
  while (false) DPLACE_CHECK(condition)
#else
#define DPLACE_DCHECK(condition) DPLACE_CHECK(condition)
#endif
