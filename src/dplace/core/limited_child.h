// For tests: runs a check in a child process whose resources are cut, so that the limit does not
// reach the test process. Header-only.
//
// Thread safety: forks; call from a single-threaded test.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace dplace::limited_child {

// Runs check() in a child that may open no further file descriptor (its RLIMIT_NOFILE is its
// lowest free descriptor number), so pipe() and open() fail with EMFILE. Returns the child's exit
// status: check()'s return value, 100 when the limit could not be set, 101 when check() threw, or
// 128 + the signal that killed it.
inline int exit_status_without_free_descriptors(const std::function<int()>& check) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    // A new descriptor takes the lowest free number, and RLIMIT_NOFILE bounds the numbers.
    int lowest_free = 0;
    while (fcntl(lowest_free, F_GETFD) != -1) ++lowest_free;
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(100);
    limit.rlim_cur = static_cast<rlim_t>(lowest_free);
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(100);
    int status = 101;
    try {
      status = check();
    } catch (...) {
    }
    _exit(status);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace dplace::limited_child
