// For tests: runs a check in a child process, so that the limits it sets (address space, stack,
// file descriptors, user) and a hang do not reach the test process. Header-only.
//
// Thread safety: forks; call from a single-threaded test.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>

namespace dplace::limited_child {

// The exit status for a child still running at the timeout (then killed).
inline constexpr int kTimedOut = 124;

// Runs check() in a forked child and returns its exit status: check()'s return value, 101 when it
// threw, 128 + the signal that killed it, or kTimedOut when it ran past `timeout`.
inline int exit_status_in_child(const std::function<int()>& check,
                                std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    int status = 101;
    try {
      status = check();
    } catch (...) {
    }
    _exit(status);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return kTimedOut;
    }
    usleep(10000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Sets the soft limit of `resource` to `value` (the hard limit stays); false when refused.
inline bool set_soft_limit(int resource, rlim_t value) {
  rlimit limit{};
  if (getrlimit(resource, &limit) != 0) return false;
  limit.rlim_cur = value;
  return setrlimit(resource, &limit) == 0;
}

// exit_status_in_child in a child that may open no further file descriptor (its RLIMIT_NOFILE is
// its lowest free descriptor number: a new descriptor takes the lowest free number, and the limit
// bounds the numbers), so pipe() and open() fail with EMFILE. 100 when the limit could not be set.
inline int exit_status_without_free_descriptors(const std::function<int()>& check) {
  return exit_status_in_child([&] {
    int lowest_free = 0;
    while (fcntl(lowest_free, F_GETFD) != -1) ++lowest_free;
    if (!set_soft_limit(RLIMIT_NOFILE, static_cast<rlim_t>(lowest_free))) return 100;
    return check();
  });
}

}  // namespace dplace::limited_child
