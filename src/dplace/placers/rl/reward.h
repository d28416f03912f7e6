// Reward sources of the RL placer: what a sampled placement's step time is.
//
//  * SimulatorRewardSource (default): the shared simulator, K placements simulated concurrently
//    by a thread pool with one SimWorkspace per worker.
//  * CommandRewardSource (--param measure-cmd='CMD {placement}'): runs an external command that
//    executes the placement for real, as the paper measured with TensorFlow. For each placement
//    it writes a dplace.placement/1 JSON file, replaces every "{placement}" in the command with
//    its path (single-quoted when it holds a character the shell would interpret), runs the
//    command with /bin/sh -c and reads its standard output until the shell exits (what it left
//    running in its process group is then killed): the last
//    non-empty line is either a step time in seconds, or a line starting with "oom"
//    (case-insensitive) for a placement that ran out of memory. Its standard error is captured,
//    not shown. A non-zero exit status, a signal or any other output is an error (ConfigError
//    naming the command and the last lines of its output and standard error). A command still
//    running at its time limit (MeasureLimits) is killed with its whole process group and its
//    placement reported as timed out.
//
// Thread safety: evaluate() is called by one thread at a time; it parallelises internally.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dplace/core/thread_pool.h"
#include "dplace/sim/placement.h"
#include "dplace/sim/simulator.h"

namespace dplace::rl {

struct Outcome {
  double step_time_s = 0;  // as measured (for an OOM placement: whatever was reported, or 0)
  bool feasible = true;    // false: out of memory, or timed out
  bool timed_out = false;  // measure-cmd only: killed at its time limit (feasible is then false)
  // The simulator only: bytes over capacity, summed over the devices out of memory (0 if it fits;
  // 0 too for a measure-cmd, which says only "oom").
  int64_t overflow_bytes = 0;
};

// When a measurement is cut off: after timeout_s seconds (0: no per-measurement limit), and in
// any case at the deadline (the run's wall-clock budget).
struct MeasureLimits {
  double timeout_s = 0;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

class RewardSource {
 public:
  virtual ~RewardSource() = default;
  // Fills outcomes[i] for placements[i]. REQUIRES: equal sizes.
  virtual void evaluate(std::span<const Placement> placements, std::span<Outcome> outcomes) = 0;
};

// REQUIRES: `simulator` and `pool` outlive the source.
std::unique_ptr<RewardSource> make_simulator_reward_source(const Simulator& simulator,
                                                           ThreadPool& pool);

// REQUIRES: `graph`, `cluster` and `pool` outlive the source. `command` must contain
// "{placement}" (ConfigError otherwise).
std::unique_ptr<RewardSource> make_command_reward_source(std::string command, const Graph& graph,
                                                         const Cluster& cluster, ThreadPool& pool,
                                                         MeasureLimits limits = {});

// The dplace.placement/1 JSON text of a placement (used for the command's input file).
std::string placement_json_text(const Graph& graph, const Cluster& cluster,
                                const Placement& placement);

}  // namespace dplace::rl
