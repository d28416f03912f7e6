#include "dplace/core/run_forked.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "dplace/core/files.h"

namespace dplace {
namespace {

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

ForkedRun run_forked(const std::function<std::string()>& work,
                     std::chrono::steady_clock::time_point deadline) {
  ForkedRun run;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    run.outcome = ForkedRun::Outcome::kNotStarted;
    run.problem = std::string("cannot create a pipe: ") + std::strerror(errno);
    return run;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    run.outcome = ForkedRun::Outcome::kNotStarted;
    run.problem = std::string("cannot fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return run;
  }
  if (pid == 0) {
    // The child: no destructors, no atexit handlers, no stdio flush of the parent's buffers.
    // It dies with the parent: a dplace killed by `kill` or a job scheduler left its solver
    // running at full CPU until the solver's own limit (seconds to minutes). The parent may have
    // died before prctl took effect, hence the check.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    close(fds[0]);
    int status = 1;
    try {
      status = write_all(fds[1], work()) ? 0 : 1;
    } catch (...) {
    }
    _exit(status);
  }
  close(fds[1]);
  char buffer[1 << 16];
  bool timed_out = false;
  while (true) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      timed_out = true;
      break;
    }
    const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
    pollfd reader{.fd = fds[0], .events = POLLIN, .revents = 0};
    const int ready = poll(&reader, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      run.output.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;  // end of the output: the child is done (or its pipe failed)
    }
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    run.outcome = ForkedRun::Outcome::kTimedOut;
    run.output.clear();
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    run.outcome = ForkedRun::Outcome::kFinished;
  } else {
    run.problem = "the child process " + describe_status(status);
    run.output.clear();
  }
  return run;
}

}  // namespace dplace
