#include "dplace/placers/rl/reward.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "dplace/core/error.h"
#include "dplace/core/files.h"
#include "dplace/core/format.h"
#include "dplace/core/json.h"

namespace dplace::rl {
namespace {

class SimulatorRewardSource final : public RewardSource {
 public:
  SimulatorRewardSource(const Simulator& simulator, ThreadPool& pool)
      : simulator_(simulator), pool_(pool), workspaces_(pool.size()), results_(pool.size()) {}

  void evaluate(std::span<const Placement> placements, std::span<Outcome> outcomes) override {
    DPLACE_CHECK(placements.size() == outcomes.size());
    pool_.parallel_for(placements.size(), [&](size_t i, size_t worker) {
      SimResult& r = results_[worker];
      simulator_.run(placements[i], workspaces_[worker], r);
      outcomes[i] = {.step_time_s = r.step_time_s,
                     .feasible = r.feasible,
                     .overflow_bytes = r.total_overflow_bytes()};
    });
  }

 private:
  const Simulator& simulator_;
  ThreadPool& pool_;
  std::vector<SimWorkspace> workspaces_;
  std::vector<SimResult> results_;
};

// What a finished (or killed) command left.
struct CommandRun {
  std::string output;  // the end of its standard output (at most 2 * kBytesKept bytes)
  std::string errors;  // the end of its standard error (at most 2 * kBytesKept bytes)
  int status = -1;     // waitpid's status
  bool timed_out = false;
};

// A measuring program may print and log freely; only the end of each stream is kept (the step
// time is on the last line of its output, the error message names the last line of each).
constexpr size_t kBytesKept = 4096;

// Reads what `fd` has now into `text` (keeping its end); false at the end of the stream.
bool read_some(int fd, std::string& text) {
  char buffer[4096];
  const ssize_t n = read(fd, buffer, sizeof buffer);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  text.append(buffer, static_cast<size_t>(n));
  if (text.size() > 2 * kBytesKept) text.erase(0, text.size() - kBytesKept);
  return true;
}

// The measurements running now: their process groups and placement files. A measurement runs in
// a group of its own (so that a timeout kills everything it started), which a terminal's Ctrl-C
// does not reach: when dplace was interrupted or killed, the measurement (a real training run,
// perhaps on GPUs) went on to its end, and its placement file stayed in TMPDIR. SIGINT, SIGTERM
// and SIGHUP now kill these groups and remove their files, then end dplace as the signal would
// have. (SIGKILL cannot be caught; a signal in the microseconds between a start and its
// registration misses that measurement.) One slot per measurement that may run at once: rl's
// worker threads are at most 256.
struct RunningMeasurement {
  std::atomic<pid_t> pgid{0};  // 0: free; -1: being filled in; else the group
  char placement_path[512] = {};
};
constexpr size_t kMaxRunningMeasurements = 256;
RunningMeasurement running_measurements[kMaxRunningMeasurements];
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Only async-signal-safe calls: kill, unlink, sigaction, raise.
void kill_measurements_then_die(int signal_number) {
  for (RunningMeasurement& m : running_measurements) {
    const pid_t pgid = m.pgid.load();
    if (pgid <= 0) continue;
    kill(-pgid, SIGKILL);
    if (m.placement_path[0] != '\0') unlink(m.placement_path);
  }
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);
  raise(signal_number);
}

// Installs the handler once, for the signals the process does not ignore (nohup's SIGHUP stays
// ignored).
void forward_signals_to_measurements() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int signal_number : kForwardedSignals) {
      struct sigaction current {};
      if (sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler == SIG_IGN) {
        continue;
      }
      struct sigaction action {};
      action.sa_handler = kill_measurements_then_die;
      sigemptyset(&action.sa_mask);
      sigaction(signal_number, &action, nullptr);
    }
  });
}

// A slot of running_measurements for one measurement, freed when it ends. With every slot taken
// the measurement is not registered; a path too long for the slot is not removed by the handler.
class RegisteredMeasurement {
 public:
  RegisteredMeasurement(pid_t pgid, const std::string& placement_path) {
    for (RunningMeasurement& m : running_measurements) {
      pid_t empty = 0;
      if (!m.pgid.compare_exchange_strong(empty, -1)) continue;
      const bool fits = placement_path.size() < sizeof m.placement_path;
      std::memcpy(m.placement_path, placement_path.c_str(), fits ? placement_path.size() + 1 : 1);
      if (!fits) m.placement_path[0] = '\0';
      m.pgid.store(pgid);
      slot_ = &m;
      return;
    }
  }
  ~RegisteredMeasurement() {
    if (slot_) slot_->pgid.store(0);
  }
  RegisteredMeasurement(const RegisteredMeasurement&) = delete;
  RegisteredMeasurement& operator=(const RegisteredMeasurement&) = delete;

 private:
  RunningMeasurement* slot_ = nullptr;
};

// Runs `command` with /bin/sh -c in a process group of its own, collecting the ends of its
// standard output and standard error, and kills the group (SIGKILL) at `deadline`. The run ends
// when the shell exits: what is then in the pipes is read, and the processes it left running in
// its group (which may hold the pipes open) are killed. While it runs, a SIGINT, SIGTERM or SIGHUP
// kills its group and removes placement_path (running_measurements). Throws ConfigError when the
// command cannot be started.
CommandRun run_command(const std::string& command, std::chrono::steady_clock::time_point deadline,
                       const std::string& described, const std::string& placement_path) {
  int out_fds[2];
  int err_fds[2];
  if (pipe2(out_fds, O_CLOEXEC) != 0) {
    throw ConfigError(
        fmt::format("measure-cmd '{}': cannot create a pipe: {}", described, std::strerror(errno)));
  }
  if (pipe2(err_fds, O_CLOEXEC) != 0) {
    const int error = errno;
    close(out_fds[0]);
    close(out_fds[1]);
    throw ConfigError(
        fmt::format("measure-cmd '{}': cannot create a pipe: {}", described, std::strerror(error)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fds[1], STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // a new group, led by the shell
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  const int spawned =
      posix_spawn(&pid, "/bin/sh", &actions, &attributes, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(out_fds[1]);
  close(err_fds[1]);
  if (spawned != 0) {
    close(out_fds[0]);
    close(err_fds[0]);
    throw ConfigError(
        fmt::format("measure-cmd '{}': cannot start: {}", described, std::strerror(spawned)));
  }
  const RegisteredMeasurement registered(pid, placement_path);
  CommandRun run;
  pollfd streams[2] = {{.fd = out_fds[0], .events = POLLIN, .revents = 0},
                       {.fd = err_fds[0], .events = POLLIN, .revents = 0}};
  auto read_ready = [&](int timeout_ms) {
    const int ready = poll(streams, 2, timeout_ms);
    if (ready <= 0) return false;
    for (int i = 0; i < 2; ++i) {
      if (streams[i].fd < 0 || streams[i].revents == 0) continue;
      if (!read_some(streams[i].fd, i == 0 ? run.output : run.errors)) {
        close(streams[i].fd);  // end of this stream (the command may still be running)
        streams[i].fd = -1;
      }
    }
    return true;
  };
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      kill(-pid, SIGKILL);
      run.timed_out = true;
      waitpid(pid, &run.status, 0);
      break;
    }
    const pid_t done = waitpid(pid, &run.status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) {
      // What is in the pipes when the shell exits (at most 64 reads: a background process still
      // writing is cut off); then whatever it left running in its process group is killed.
      for (int reads = 0; reads < 64 && (streams[0].fd >= 0 || streams[1].fd >= 0); ++reads) {
        if (!read_ready(0)) break;
      }
      kill(-pid, SIGKILL);
      break;
    }
    // Wake at least every 10 ms to see whether the shell has exited.
    const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (streams[0].fd >= 0 || streams[1].fd >= 0) {
      read_ready(static_cast<int>(std::min<int64_t>(left_ms.count() + 1, 10)));
    } else {
      usleep(1000);
    }
  }
  for (const pollfd& stream : streams) {
    if (stream.fd >= 0) close(stream.fd);
  }
  return run;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

// The last line of `text` with anything in it, trimmed ("" when there is none).
std::string last_line(const std::string& text) {
  size_t end = text.size();
  while (end > 0) {
    const size_t start = text.rfind('\n', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = trim(text.substr(from, end - from));
    if (!line.empty() || start == std::string::npos) return line;
    end = start;
  }
  return "";
}

// `path` as one shell word: unchanged when it holds only characters the shell takes literally,
// else in single quotes (a quote inside written as '\'').
std::string shell_quoted(const std::string& path) {
  if (path.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                             "_./-+,:@%=") == std::string::npos) {
    return path;
  }
  std::string quoted = "'";
  for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

class CommandRewardSource final : public RewardSource {
 public:
  CommandRewardSource(std::string command, const Graph& graph, const Cluster& cluster,
                      ThreadPool& pool, MeasureLimits limits)
      : command_(std::move(command)),
        graph_(graph),
        cluster_(cluster),
        pool_(pool),
        limits_(limits) {
    if (command_.find("{placement}") == std::string::npos) {
      throw ConfigError(fmt::format(
          "--param measure-cmd='{}': the command must contain {{placement}}", command_));
    }
    forward_signals_to_measurements();
  }

  void evaluate(std::span<const Placement> placements, std::span<Outcome> outcomes) override {
    DPLACE_CHECK(placements.size() == outcomes.size());
    pool_.parallel_for(placements.size(),
                       [&](size_t i, size_t /*worker*/) { outcomes[i] = run_one(placements[i]); });
  }

 private:
  Outcome run_one(const Placement& placement) const {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string path = fmt::format("{}/dplace-rl-XXXXXX.json", tmpdir ? tmpdir : "/tmp");
    const int fd = mkstemps(path.data(), 5);
    if (fd < 0) {
      throw ConfigError(fmt::format("measure-cmd: cannot create a temporary file in {}: {}",
                                    tmpdir ? tmpdir : "/tmp", std::strerror(errno)));
    }
    close(fd);
    // A full TMPDIR used to hand the command an empty file without a word.
    if (const std::string why =
            write_file_whole(path, placement_json_text(graph_, cluster_, placement));
        !why.empty()) {
      std::remove(path.c_str());
      throw ConfigError(
          fmt::format("measure-cmd: cannot write the placement file {}: {}", path, why));
    }
    const std::string quoted = shell_quoted(path);
    std::string command = command_;
    for (size_t at = command.find("{placement}"); at != std::string::npos;
         at = command.find("{placement}", at + quoted.size())) {
      command.replace(at, 11, quoted);
    }
    auto deadline = limits_.deadline;
    if (limits_.timeout_s > 0) {
      const auto limit = std::chrono::steady_clock::now() + steady_seconds(limits_.timeout_s);
      deadline = std::min(deadline, limit);
    }
    CommandRun ran;
    try {
      ran = run_command(command, deadline, command_, path);
    } catch (...) {
      std::remove(path.c_str());
      throw;
    }
    std::remove(path.c_str());
    if (ran.timed_out) return {.step_time_s = 0, .feasible = false, .timed_out = true};
    const int status = ran.status;
    const std::string line = last_line(ran.output);
    // As shown in messages: a NUL or other control character would cut or break the line.
    const std::string shown_line = escape_control_characters(line);
    const std::string shown_errors = escape_control_characters(last_line(ran.errors));
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      const std::string how =
          status == -1 ? std::string("could not be waited for")
          : WIFSIGNALED(status)
              ? fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                            strsignal(WTERMSIG(status)))
              : fmt::format("exited with status {}", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      throw ConfigError(
          fmt::format("measure-cmd '{}': {} (last line of output: '{}'; last line on stderr: '{}')",
                      command_, how, shown_line, shown_errors));
    }
    std::string lower = line;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.rfind("oom", 0) == 0) return {.step_time_s = 0, .feasible = false};
    char* parse_end = nullptr;
    const double seconds = std::strtod(line.c_str(), &parse_end);
    // Decimal notation only: strtod would also take "0x10" or "inf". At most kMaxLimitSeconds:
    // the reward divides by the lower bound, and 1e306 s overflowed into "the learning diverged".
    if (line.empty() || line.find_first_not_of("0123456789.eE+-") != std::string::npos ||
        parse_end != line.c_str() + line.size() || !std::isfinite(seconds) || seconds <= 0 ||
        seconds > kMaxLimitSeconds) {
      throw ConfigError(fmt::format(
          "measure-cmd '{}': expected a step time in seconds (above 0, at most {}) or 'oom' as the "
          "last line of its output, got '{}' (last line on stderr: '{}')",
          command_, kMaxLimitSeconds, shown_line, shown_errors));
    }
    return {.step_time_s = seconds, .feasible = true};
  }

  std::string command_;
  const Graph& graph_;
  const Cluster& cluster_;
  ThreadPool& pool_;
  MeasureLimits limits_;
};

}  // namespace

std::unique_ptr<RewardSource> make_simulator_reward_source(const Simulator& simulator,
                                                           ThreadPool& pool) {
  return std::make_unique<SimulatorRewardSource>(simulator, pool);
}

std::unique_ptr<RewardSource> make_command_reward_source(std::string command, const Graph& graph,
                                                         const Cluster& cluster, ThreadPool& pool,
                                                         MeasureLimits limits) {
  return std::make_unique<CommandRewardSource>(std::move(command), graph, cluster, pool, limits);
}

std::string placement_json_text(const Graph& graph, const Cluster& cluster,
                                const Placement& placement) {
  Json assignment = Json::object();
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    assignment[graph.op(OpId::from_index(i)).name] = cluster.device(placement.device_of_op[i]).name;
  }
  Json doc = {{"format", "dplace.placement/1"},
              {"graph", graph.name()},
              {"cluster", cluster.name()},
              {"assignment", std::move(assignment)}};
  return doc.dump(1) + "\n";
}

}  // namespace dplace::rl
