#include "dplace/placers/rl/reward.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "dplace/core/error.h"
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
      outcomes[i] = {.step_time_s = r.step_time_s, .feasible = r.feasible};
    });
  }

 private:
  const Simulator& simulator_;
  ThreadPool& pool_;
  std::vector<SimWorkspace> workspaces_;
  std::vector<SimResult> results_;
};

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

class CommandRewardSource final : public RewardSource {
 public:
  CommandRewardSource(std::string command, const Graph& graph, const Cluster& cluster,
                      ThreadPool& pool)
      : command_(std::move(command)), graph_(graph), cluster_(cluster), pool_(pool) {
    if (command_.find("{placement}") == std::string::npos) {
      throw ConfigError(fmt::format(
          "--param measure-cmd='{}': the command must contain {{placement}}", command_));
    }
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
      throw ConfigError(
          fmt::format("measure-cmd: cannot create a temporary file: {}", std::strerror(errno)));
    }
    close(fd);
    {
      std::ofstream out(path);
      out << placement_json_text(graph_, cluster_, placement);
    }
    std::string command = command_;
    for (size_t at = command.find("{placement}"); at != std::string::npos;
         at = command.find("{placement}", at + path.size())) {
      command.replace(at, 11, path);
    }
    std::string output;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      std::remove(path.c_str());
      throw ConfigError(
          fmt::format("measure-cmd '{}': cannot start: {}", command_, std::strerror(errno)));
    }
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
    const int status = pclose(pipe);
    std::remove(path.c_str());
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw ConfigError(fmt::format("measure-cmd '{}': exited with status {} (output: '{}')",
                                    command_, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                    trim(output)));
    }
    // The last non-empty line.
    std::string line;
    size_t end = output.size();
    while (end > 0) {
      const size_t start = output.rfind('\n', end - 1);
      const size_t from = start == std::string::npos ? 0 : start + 1;
      line = trim(output.substr(from, end - from));
      if (!line.empty() || start == std::string::npos) break;
      end = start;
    }
    std::string lower = line;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.rfind("oom", 0) == 0) return {.step_time_s = 0, .feasible = false};
    char* parse_end = nullptr;
    const double seconds = std::strtod(line.c_str(), &parse_end);
    if (line.empty() || parse_end != line.c_str() + line.size() || !std::isfinite(seconds) ||
        seconds <= 0) {
      throw ConfigError(fmt::format(
          "measure-cmd '{}': expected a step time in seconds or 'oom' as the last line of its "
          "output, got '{}'",
          command_, line));
    }
    return {.step_time_s = seconds, .feasible = true};
  }

  std::string command_;
  const Graph& graph_;
  const Cluster& cluster_;
  ThreadPool& pool_;
};

}  // namespace

std::unique_ptr<RewardSource> make_simulator_reward_source(const Simulator& simulator,
                                                           ThreadPool& pool) {
  return std::make_unique<SimulatorRewardSource>(simulator, pool);
}

std::unique_ptr<RewardSource> make_command_reward_source(std::string command, const Graph& graph,
                                                         const Cluster& cluster, ThreadPool& pool) {
  return std::make_unique<CommandRewardSource>(std::move(command), graph, cluster, pool);
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
