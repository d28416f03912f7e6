#include "dplace/placers/rl/rl_placer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "dplace/core/clock.h"
#include "dplace/core/error.h"
#include "dplace/core/files.h"
#include "dplace/core/fingerprint.h"
#include "dplace/core/format.h"
#include "dplace/core/rng.h"
#include "dplace/core/thread_pool.h"
#include "dplace/ir/coarsening.h"
#include "dplace/placers/learning/curve_file.h"
#include "dplace/placers/learning/features.h"
#include "dplace/placers/learning/groupings.h"
#include "dplace/placers/rl/policy.h"
#include "dplace/placers/rl/reward.h"
#include "dplace/placers/rl/torch_module.h"

namespace dplace::rl {
namespace {

// The memory this process may use, in bytes: the machine's physical memory, or the limit of its
// control group (cgroup v2's memory.max) when that is lower, as in a container; 0 when the system
// says neither.
int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page_bytes > 0 ? static_cast<int64_t>(pages) * page_bytes : 0;
  std::ifstream limit_file("/sys/fs/cgroup/memory.max");
  int64_t limit = 0;
  if (limit_file >> limit && limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  return bytes;
}

[[noreturn]] void bad_param(const std::string& key, const std::string& value,
                            const std::string& expected) {
  throw ConfigError(fmt::format("placer 'rl': --param {}={}: expected {}", key, value, expected));
}

// An integer in [min_value, max_value] (max_value: the largest the option can use).
int64_t parse_int(const std::string& key, const std::string& value, int64_t min_value,
                  int64_t max_value = std::numeric_limits<int64_t>::max()) {
  const std::string expected = max_value == std::numeric_limits<int64_t>::max()
                                   ? fmt::format("an integer >= {}", min_value)
                                   : fmt::format("an integer in [{}, {}]", min_value, max_value);
  size_t used = 0;
  int64_t v = 0;
  try {
    // std::stoll would skip leading blanks.
    if (value.empty() || std::isspace(static_cast<unsigned char>(value[0]))) throw std::exception();
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    bad_param(key, value, expected);
  }
  if (used != value.size() || v < min_value || v > max_value) bad_param(key, value, expected);
  return v;
}

// A file name or command; an empty one (e.g. an unset shell variable) would silently turn the
// option off, so it is refused.
const std::string& non_empty(const std::string& key, const std::string& value,
                             const std::string& expected) {
  if (value.empty()) bad_param(key, value, expected);
  return value;
}

// A number above min_value (or equal, when inclusive) and at most max_value.
double parse_double(const std::string& key, const std::string& value, double min_value,
                    bool inclusive, double max_value = INFINITY) {
  double v = 0;
  const std::string expected =
      std::isfinite(max_value)
          ? fmt::format("a number in {}{}, {}]", inclusive ? "[" : "(", min_value, max_value)
          : fmt::format("a number {} {}", inclusive ? ">=" : ">", min_value);
  // Decimal only, as PlacerParams reads numbers: std::stod also took "0x1" and leading blanks.
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
      !std::isfinite(v) || v < min_value || (!inclusive && v == min_value) || v > max_value) {
    bad_param(key, value, expected);
  }
  return v;
}

constexpr const char* kCurveHeader =
    "update,samples,elapsed_s,mean_step_time_s,batch_best_step_time_s,best_step_time_s,"
    "oom_fraction,entropy,baseline,policy_s,evaluate_s,restarts,level,grouping\n";

// Starts the learning curve before the run spends its budget: a new run writes the header (a path
// that cannot be written fails now); a run resumed at `updates` keeps the rows up to that update
// and drops later ones, written before an interruption, which it is about to redo.
void start_curve(const std::string& path, bool resumed, int64_t updates) {
  std::string kept = kCurveHeader;
  std::ifstream in(path);
  if (resumed && in) {
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      int64_t update = 0;
      const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), update);
      if (error == std::errc() && end != line.data() && update <= updates) kept += line + "\n";
    }
  }
  in.close();
  std::ofstream out(path, std::ios::trunc);
  out << kept;
  out.close();
  if (!out) throw_cannot_write_curve(path);
}

// Appends rows to the curve begun by start_curve. grouping_names: per CurvePoint::grouping, the
// name written in the CSV.
void write_curve(const std::string& path, const std::vector<CurvePoint>& curve,
                 const std::vector<std::string>& grouping_names) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw_cannot_write_curve(path);
  for (const CurvePoint& p : curve) {
    out << fmt::format(
        "{},{},{:.6g},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g},{:.9g},{:.6g},{:.6g},{},{},{}\n", p.update,
        p.samples, p.elapsed_s, p.mean_step_time_s, p.batch_best_step_time_s, p.best_step_time_s,
        p.oom_fraction, p.entropy, p.baseline, p.policy_s, p.evaluate_s, p.restarts, p.level + 1,
        grouping_names[p.grouping]);
  }
  out.close();
  if (!out) throw_cannot_write_curve(path);
}

// Refuses a checkpoint path that could not be written, before the run spends its budget.
void check_checkpoint_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (const std::string problem = path_status_problem(path); !problem.empty()) {
    throw ConfigError(fmt::format("--param checkpoint={}: {}", path, problem));
  }
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) {
    throw ConfigError(fmt::format("--param checkpoint={}: not a regular file", path));
  }
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (!fs::is_directory(dir, ec)) {
    throw ConfigError(fmt::format("--param checkpoint={}: no directory '{}'", path, dir));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    throw ConfigError(fmt::format("--param checkpoint={}: cannot write in '{}': {}", path, dir,
                                  std::strerror(errno)));
  }
}

// One grouping at every level, coarsest first (nested), with its groups' features.
struct Grouping {
  std::string name;  // "merged" or "apart" (RlOptions::shared_weights)
  std::vector<Coarsening> levels;
  std::vector<GroupFeatures> features;
};

}  // namespace

RlOptions rl_options_from_params(const std::map<std::string, std::string>& params) {
  RlOptions o;
  const std::map<std::string, std::function<void(const std::string&, const std::string&)>> setters =
      {
          {"groups", [&](auto& k, auto& v) { o.groups = parse_int(k, v, 2, 1 << 20); }},
          {"sole-consumer",
           [&](auto& k, auto& v) {
             if (v != "full" && v != "limited" && v != "chains" && v != "off")
               bad_param(k, v, "full, limited, chains or off");
             o.sole_consumer = v;
           }},
          {"sole-consumer-limit",
           [&](auto& k, auto& v) { o.sole_consumer_limit = parse_double(k, v, 0, false); }},
          {"cap",
           [&](auto& k, auto& v) {
             if (v != "lightest" && v != "communication")
               bad_param(k, v, "lightest or communication");
             o.cap = v;
           }},
          {"cap-transfer-scale",
           [&](auto& k, auto& v) { o.cap_transfer_scale = parse_double(k, v, 0, true); }},
          {"shared-weights",
           [&](auto& k, auto& v) {
             if (v != "apart" && v != "merged" && v != "alternate")
               bad_param(k, v, "merged, apart or alternate");
             o.shared_weights = v;
           }},
          {"batch",
           [&](auto& k, auto& v) { o.batch = static_cast<int>(parse_int(k, v, 1, 1024)); }},
          {"levels",
           [&](auto& k, auto& v) { o.levels = static_cast<int>(parse_int(k, v, 1, 16)); }},
          {"restart-patience", [&](auto& k, auto& v) { o.restart_patience = parse_int(k, v, 0); }},
          {"restart-entropy",
           [&](auto& k, auto& v) { o.restart_entropy = parse_double(k, v, 0, false); }},
          {"samples", [&](auto& k, auto& v) { o.max_samples = parse_int(k, v, 0); }},
          {"enumerate", [&](auto& k, auto& v) { o.enumerate = parse_int(k, v, 0, 1 << 20); }},
          {"hidden",
           [&](auto& k, auto& v) { o.hidden = static_cast<int>(parse_int(k, v, 1, 1024)); }},
          {"embedding",
           [&](auto& k, auto& v) {
             o.device_embedding = static_cast<int>(parse_int(k, v, 1, 1024));
           }},
          {"lr", [&](auto& k, auto& v) { o.learning_rate = parse_double(k, v, 0, false, 1); }},
          {"clip", [&](auto& k, auto& v) { o.grad_clip = parse_double(k, v, 0, true); }},
          {"entropy",
           [&](auto& k, auto& v) { o.entropy_weight = parse_double(k, v, 0, true, 100); }},
          {"entropy-final",
           [&](auto& k, auto& v) { o.entropy_final = parse_double(k, v, 0, true, 100); }},
          {"entropy-samples", [&](auto& k, auto& v) { o.entropy_samples = parse_int(k, v, 0); }},
          {"baseline-decay",
           [&](auto& k, auto& v) {
             o.baseline_decay = parse_double(k, v, 0, true);
             if (o.baseline_decay >= 1) bad_param(k, v, "a number in [0, 1)");
           }},
          {"oom-time",
           [&](auto& k, auto& v) {
             o.oom_step_time_s = parse_double(k, v, 0, false, kMaxLimitSeconds);
           }},
          {"normalize",
           [&](auto& k, auto& v) { o.normalize_advantages = parse_int(k, v, 0, 1) != 0; }},
          {"threads", [&](auto& k, auto& v) { o.threads = parse_int(k, v, 1, 256); }},
          {"chunk",
           [&](auto& k, auto& v) { o.chunk = static_cast<int>(parse_int(k, v, 0, 4096)); }},
          {"imitation", [&](auto& k, auto& v) { o.imitation = parse_double(k, v, 0, true, 100); }},
          {"checkpoint", [&](auto& k, auto& v) { o.checkpoint = non_empty(k, v, "a file name"); }},
          {"checkpoint-every",
           [&](auto& k, auto& v) {
             o.checkpoint_every = static_cast<int>(parse_int(k, v, 1, 1 << 30));
           }},
          {"curve", [&](auto& k, auto& v) { o.curve = non_empty(k, v, "a file name"); }},
          {"init",
           [&](auto& k, auto& v) {
             if (v != "none" && v != "expert") bad_param(k, v, "none or expert");
             o.init = v;
           }},
          {"init-steps",
           [&](auto& k, auto& v) { o.init_steps = static_cast<int>(parse_int(k, v, 1, 1 << 30)); }},
          {"measure-cmd",
           [&](auto& k, auto& v) {
             o.measure_cmd = non_empty(k, v, "a command containing {placement}");
           }},
          {"measure-timeout",
           [&](auto& k, auto& v) {
             o.measure_timeout_s = parse_double(k, v, 0, true);
             if (o.measure_timeout_s > kMaxLimitSeconds) {
               bad_param(k, v, fmt::format("a number of seconds in [0, {}]", kMaxLimitSeconds));
             }
           }},
          {"polish", [&](auto& k, auto& v) { o.polish_evaluations = parse_int(k, v, 0); }},
          {"polish-share",
           [&](auto& k, auto& v) {
             o.polish_share = parse_double(k, v, 0, true);
             if (o.polish_share >= 1) bad_param(k, v, "a number in [0, 1)");
           }},
          {"polish-rounds",
           [&](auto& k, auto& v) { o.polish_rounds = static_cast<int>(parse_int(k, v, 1, 1024)); }},
          {"progress-seconds",
           [&](auto& k, auto& v) { o.progress_seconds = parse_double(k, v, 0, true); }},
      };
  for (const auto& [key, value] : params) {
    const auto it = setters.find(key);
    if (it == setters.end()) {
      std::string known;
      for (const auto& [k, unused] : setters) known += (known.empty() ? "" : ", ") + k;
      throw ConfigError(fmt::format("placer 'rl': unknown --param '{}' (known: {})", key, known));
    }
    it->second(key, value);
  }
  if (!o.measure_cmd.empty()) {
    if (o.polish_evaluations > 0) {
      throw ConfigError(
          "placer 'rl': --param polish simulates its moves, so it cannot refine a placement "
          "measured with --param measure-cmd; use polish=0");
    }
    o.polish_evaluations = 0;
  }
  return o;
}

RlRun run_rl(const PlaceRequest& request, const RlOptions& options) {
  // Loading LibTorch (the first time in a process, about a second) is not part of the run: it
  // stays out of the budget, the samples per second and the curve's times, as starting the process
  // does.
  load_torch_module();
  if (!options.checkpoint.empty()) check_checkpoint_path(options.checkpoint);
  const auto start = Clock::now();
  const auto deadline = start + steady_seconds(request.budget_seconds);
  const Graph& graph = *request.graph;
  const Cluster& cluster = *request.cluster;
  const CostTable& costs = *request.costs;
  const Simulator& simulator = *request.simulator;
  DPLACE_CHECK(options.batch > 0 && options.levels > 0);

  // 1. Grouping, at every level (coarsest first; nested): placers/learning/groupings.h. The
  // groupings the run cycles through, one per restart (see RlOptions::shared_weights).
  std::vector<Grouping> groupings;
  for (NamedGrouping& named :
       make_learning_groupings(graph, cluster, costs,
                               LearningGroupingOptions{.groups = options.groups,
                               .sole_consumer = options.sole_consumer,
                               .sole_consumer_limit = options.sole_consumer_limit,
                               .cap = options.cap,
                               .cap_transfer_scale = options.cap_transfer_scale,
                               .shared_weights = options.shared_weights,
                               .levels = options.levels})) {
    Grouping grouping{.name = std::move(named.name), .levels = std::move(named.levels)};
    for (const Coarsening& c : grouping.levels)
      grouping.features.push_back(make_group_features(graph, costs, c));
    groupings.push_back(std::move(grouping));
  }
  const int F = static_cast<int>(groupings.size());
  auto grouping_at = [&](int64_t restarts) -> const Grouping& { return groupings[restarts % F]; };
  // Best placements are kept per group of the base grouping, nested in every level of every
  // grouping: their common refinement (the finest level itself when there is one grouping).
  std::vector<Coarsening> finest_levels;
  for (const Grouping& g : groupings) finest_levels.push_back(g.levels.back());
  const Coarsening base = common_refinement(graph, finest_levels);
  const GroupFeatures base_features = make_group_features(graph, costs, base);
  const int D = base_features.num_devices;
  const int K = options.batch;
  const int G_base = static_cast<int>(base.num_groups);

  // The policy's passes hold every decoder row of a batch (policy_pass_bytes): refuse sizes that
  // would take more than half of this machine's memory (hidden 1,024 with batch 1,024 over 256
  // groups needs 21 GB) rather than let the system run out of it.
  for (const Grouping& g : groupings) {
    PolicyConfig pc;
    pc.num_groups = g.features.back().num_groups;
    pc.num_devices = D;
    pc.hidden = options.hidden;
    const int64_t need_bytes = policy_pass_bytes(pc, K + 1);
    const int64_t have_bytes = physical_memory_bytes();
    if (have_bytes > 0 && need_bytes > have_bytes / 2) {
      throw ConfigError(fmt::format(
          "placer 'rl': a batch of {} samples over {} groups at hidden {} needs about {:.1f} GB "
          "for the policy's activations, more than half of this machine's {:.1f} GB of memory; "
          "lower --param batch, hidden or groups",
          K, pc.num_groups, pc.hidden, need_bytes / 1e9, have_bytes / 1e9));
    }
  }

  RlRun run;
  run.num_groups = groupings.front().levels.back().num_groups;
  run.base_groups = base.num_groups;
  run.colocation_groups = base.colocation_groups;
  run.after_sole_consumer = base.after_sole_consumer;
  for (const Grouping& g : groupings) {
    run.groupings.push_back(g.name);
    run.level_groups.emplace_back();
    for (const Coarsening& c : g.levels) run.level_groups.back().push_back(c.num_groups);
  }

  // Device per base group <-> device per group of a level. Every base group lies inside one
  // group of each level, so refining a placement is exact; coarsening one gives each group the
  // device holding most of its compute.
  auto refine = [&](const Grouping& grouping, int level, std::span<const int32_t> devices) {
    std::vector<int32_t> out(static_cast<size_t>(G_base));
    for (int b = 0; b < G_base; ++b) {
      const OpId op = base.group_ops[b].front();
      out[b] = devices[grouping.levels[level].group_of_op[op.value()].value()];
    }
    return out;
  };
  // device_of_op(op) -> device index; each group of `level` takes its majority by compute.
  auto project = [&](const Grouping& grouping, int level,
                     const std::function<int32_t(OpId)>& device_of_op) {
    const GroupFeatures& features = grouping.features[level];
    const int G = features.num_groups;
    std::vector<int32_t> target(G, -1);
    for (int g = 0; g < G; ++g) {
      std::vector<double> votes(D, 0.0);
      for (OpId op : grouping.levels[level].group_ops[g]) {
        votes[device_of_op(op)] += costs.fastest_time_s(op) + 1e-12;
      }
      for (int d = 0; d < D; ++d) {
        if (!features.allowed[static_cast<size_t>(g) * D + d]) continue;
        if (target[g] < 0 || votes[d] > votes[target[g]]) target[g] = d;
      }
    }
    return target;
  };
  auto coarsen_best = [&](const Grouping& grouping, int level,
                          std::span<const int32_t> base_devices) {
    return project(grouping, level,
                   [&](OpId op) { return base_devices[base.group_of_op[op.value()].value()]; });
  };

  // 2. Policy (one per level; a move to another level or a restart builds a fresh one).
  ThreadPool pool(options.threads);
  auto policy_for_level = [&](const Grouping& grouping, int level, uint64_t seed) {
    const GroupFeatures& features = grouping.features[level];
    PolicyConfig pc;
    pc.num_groups = features.num_groups;
    pc.num_devices = D;
    pc.feature_dim = features.feature_dim;
    pc.hidden = options.hidden;
    pc.device_embedding = options.device_embedding;
    pc.learning_rate = options.learning_rate;
    pc.grad_clip = options.grad_clip;
    pc.seed = seed;
    pc.chunk = options.chunk > 0 ? options.chunk : (options.batch + 1) / 2;
    std::unique_ptr<Policy> policy = make_policy(pc, features.values, features.allowed);
    policy->use_parallel_for(parallel_for_on(pool));
    policy->set_deadline(deadline);
    return policy;
  };
  // Fits the policy to one placement by maximum likelihood (a warm start), within the budget.
  auto imitate = [&](Policy& policy, const std::vector<int32_t>& target) {
    const std::vector<double> one = {1.0};
    try {
      for (int i = 0; i < options.init_steps && seconds_since(start) < request.budget_seconds; ++i)
        policy.update(target, one, 0.0);
    } catch (const PolicyDeadlinePassed&) {
      // The step under way is dropped; the steps before it stand.
    }
  };

  // Names alone let a checkpoint resume on a graph or cluster that was edited under the same name
  // (its best placement then means something else): the figures the rewards depend on go in too.
  const auto bits = [](double x) { return std::bit_cast<uint64_t>(x); };
  Fingerprint fp;
  fp.add(graph.name());
  fp.add(graph.num_ops());
  fp.add(cluster.name());
  fp.add(cluster.num_devices());
  for (size_t o = 0; o < graph.num_ops(); ++o) {
    const OpId op = OpId::from_index(o);
    for (size_t d = 0; d < cluster.num_devices(); ++d) {
      fp.add(bits(costs.time_s(op, DeviceId::from_index(d))));
    }
    for (int64_t bytes : graph.op(op).output_bytes) fp.add(static_cast<uint64_t>(bytes));
    for (const TensorRef& in : graph.op(op).inputs) {
      fp.add(in.op.value());
      fp.add(in.output);
    }
    fp.add(static_cast<uint64_t>(graph.op(op).param_bytes));
    fp.add(static_cast<uint64_t>(graph.op(op).temp_bytes));
  }
  for (size_t a = 0; a < cluster.num_devices(); ++a) {
    fp.add(static_cast<uint64_t>(cluster.device(DeviceId::from_index(a)).memory_bytes));
    for (size_t b = 0; b < cluster.num_devices(); ++b) {
      const Link* link =
          a == b ? nullptr : cluster.link(DeviceId::from_index(a), DeviceId::from_index(b));
      fp.add(link ? bits(link->bandwidth_bytes_per_s) : 0);
      fp.add(link ? bits(link->latency_s) : 0);
    }
  }
  for (const Grouping& grouping : groupings) {
    for (const Coarsening& c : grouping.levels) {
      for (GroupId g : c.group_of_op) fp.add(g.value());
    }
  }
  fp.add(request.seed);
  fp.add(static_cast<uint64_t>(K));
  // The reward source: a best time measured by one command is not comparable with another's or
  // the simulator's (a resumed run kept a simulated 1.4 ms best against measured 0.5 s). Only a
  // command is added, so that checkpoints of simulator runs made before stay valid.
  if (!options.measure_cmd.empty()) fp.add("measure-cmd " + options.measure_cmd);

  TrainerState state;
  state.fingerprint = fp.value();
  std::unique_ptr<Policy> policy;
  std::error_code exists_error;
  if (!options.checkpoint.empty() && std::filesystem::exists(options.checkpoint, exists_error)) {
    const TrainerState saved = read_trainer_state(options.checkpoint);
    if (saved.fingerprint != state.fingerprint || saved.restarts < 0 || saved.level < 0 ||
        saved.level >= static_cast<int64_t>(grouping_at(saved.restarts).levels.size())) {
      throw ConfigError(fmt::format(
          "checkpoint '{}': made for another graph, cluster, grouping, seed, batch size or "
          "reward source (the simulator or a measure-cmd)",
          options.checkpoint));
    }
    policy =
        policy_for_level(grouping_at(saved.restarts), static_cast<int>(saved.level), request.seed);
    state = policy->load(options.checkpoint);
    // A damaged file may still parse: check every value the run indexes or divides with.
    const std::vector<uint8_t>& allowed = base_features.allowed;
    auto problem = [&]() -> std::string {
      if (state.updates < 0 || state.samples < 0 || state.restarts < 0 || state.refinements < 0 ||
          state.stalled_updates < 0 || state.samples_at_restart < 0 ||
          state.samples_at_restart > state.samples) {
        return "negative or inconsistent counters";
      }
      if (!std::isfinite(state.baseline) || !std::isfinite(state.elapsed_s) ||
          state.elapsed_s < 0 || !std::isfinite(state.oom_step_time_s) ||
          state.oom_step_time_s < 0) {
        return "baseline, elapsed time or OOM step time is not a finite number";
      }
      if (state.best_actions.empty()) return {};
      if (state.best_actions.size() != static_cast<size_t>(G_base)) {
        return fmt::format("best placement has {} groups, not {}", state.best_actions.size(),
                           G_base);
      }
      if (!(state.best_step_time_s > 0) || !std::isfinite(state.best_step_time_s)) {
        return "best step time is not a positive number";
      }
      for (int f = 0; f < G_base; ++f) {
        const int32_t d = state.best_actions[f];
        if (d < 0 || d >= D || !allowed[static_cast<size_t>(f) * D + d]) {
          return fmt::format(
              "best placement puts group {} on device index {}, which it may not use", f, d);
        }
      }
      return {};
    };
    if (const std::string p = problem(); !p.empty()) {
      throw ConfigError(fmt::format("checkpoint '{}': damaged: {}", options.checkpoint, p));
    }
    run.resumed = true;
  } else {
    policy = policy_for_level(groupings.front(), 0, request.seed);
  }
  std::vector<int32_t> warm_start;  // the expert projected onto the coarsest groups (init=expert)
  if (!run.resumed && options.init == "expert") {
    if (!request.expert) {
      throw ConfigError(fmt::format(
          "placer 'rl': --param init=expert: graph '{}' has no expert placement for cluster '{}'; "
          "pass one with --placement FILE",
          graph.name(), cluster.name()));
    }
    // Each group takes the device holding most of its compute in the expert placement (among the
    // devices the group may use), then the policy learns to reproduce that sequence.
    warm_start = project(groupings.front(), 0, [&](OpId op) {
      return static_cast<int32_t>((*request.expert)[op].value());
    });
    imitate(*policy, warm_start);
  }

  // 3. Reward source.
  std::unique_ptr<RewardSource> source =
      options.measure_cmd.empty()
          ? make_simulator_reward_source(simulator, pool)
          : make_command_reward_source(
                options.measure_cmd, graph, cluster, pool,
                {.timeout_s = options.measure_timeout_s, .deadline = deadline});
  // The step time charged to an OOM placement: oom-time when given; else twice an upper bound on
  // any simulated step time, raised to twice the slowest fitting measurement (a measure-cmd's
  // times need not be the simulator's), so that every fitting placement beats every OOM one.
  // oom-time is raised the same way, but only when a fitting placement takes at least as long
  // (a charge below a fitting time made an OOM placement the best; the note says so).
  // A best placement that is OOM (charged at least the charge) is charged the new one too: on
  // resuming (oom-time may differ) and whenever the charge rises.
  auto set_oom_charge = [&](double charge_s) {
    if (!state.best_actions.empty() && state.oom_step_time_s > 0 &&
        state.best_step_time_s >= state.oom_step_time_s) {
      state.best_step_time_s = charge_s;
    }
    state.oom_step_time_s = charge_s;
  };
  const bool penalty_rises = !(options.oom_step_time_s > 0);
  auto raise_for_fitting = [&](double fitting_step_s) {
    if (penalty_rises ? 2 * fitting_step_s > state.oom_step_time_s
                      : fitting_step_s >= state.oom_step_time_s) {
      set_oom_charge(2 * fitting_step_s);
    }
  };
  const bool resumed_best_fits = !state.best_actions.empty() && state.oom_step_time_s > 0 &&
                                 state.best_step_time_s < state.oom_step_time_s;
  set_oom_charge(!penalty_rises              ? options.oom_step_time_s
                 : state.oom_step_time_s > 0 ? state.oom_step_time_s
                                             : 2 * step_time_upper_bound_s(graph, cluster, costs));
  if (resumed_best_fits) raise_for_fitting(state.best_step_time_s);
  auto raise_penalty = [&](std::span<const Outcome> evaluated) {
    for (const Outcome& o : evaluated) {
      if (o.feasible) raise_for_fitting(o.step_time_s);
    }
  };
  auto penalised_time = [&](const Outcome& o) {
    return o.feasible ? o.step_time_s : state.oom_step_time_s;
  };
  const double reference_s = simulator.lower_bound_s() > 0 ? simulator.lower_bound_s() : 1.0;
  auto reward_of = [&](double penalised_s) { return -std::sqrt(penalised_s / reference_s); };

  std::vector<Placement> placements(K);
  for (Placement& p : placements) p.device_of_op.resize(graph.num_ops());
  // A placement from one device per group of a grouping.
  auto fill = [&](Placement& p, const Coarsening& grouping, const int32_t* group_devices) {
    const std::vector<GroupId>& group_of_op = grouping.group_of_op;
    for (size_t i = 0; i < graph.num_ops(); ++i) {
      p.device_of_op[i] = DeviceId::from_index(group_devices[group_of_op[i].value()]);
    }
  };

  // One group -> device assignment of a grouping, evaluated.
  struct Evaluated {
    Outcome outcome;
    double penalised_s = 0;
  };
  // Placements evaluated one at a time (outside the batches): the warm start, a resumed OOM best,
  // the greedy decoding, the fallback.
  int64_t single_evaluations = 0;
  auto evaluate_one = [&](const Coarsening& grouping, const std::vector<int32_t>& group_devices) {
    ++single_evaluations;
    Placement& p = placements.front();
    fill(p, grouping, group_devices.data());
    std::vector<Outcome> one(1);
    source->evaluate(std::span<const Placement>(&p, 1), one);
    raise_penalty(one);
    return Evaluated{.outcome = one[0], .penalised_s = penalised_time(one[0])};
  };
  // OOM placements are all charged alike, so the best of them is the first seen; the one with the
  // least memory over capacity in all, then the shortest step (as the list schedulers' memory
  // repair ranks placements by their total overflow), is kept aside and
  // returned instead when the best is OOM at the end. Kept apart from the best so that the learning
  // (its self-imitation row) is what it was. Base groups; empty: none seen.
  std::vector<int32_t> least_overflow_actions;
  Outcome least_overflow;  // its outcome
  auto least_overflow_so_far = [&](const Outcome& o) {
    const Outcome& l = least_overflow;
    return !o.feasible && o.overflow_bytes > 0 &&
           (least_overflow_actions.empty() || o.overflow_bytes < l.overflow_bytes ||
            (o.overflow_bytes == l.overflow_bytes && o.step_time_s < l.step_time_s));
  };
  auto consider_oom = [&](const Outcome& o, const std::vector<int32_t>& base_actions) {
    if (!least_overflow_so_far(o)) return;
    least_overflow_actions = base_actions;
    least_overflow = o;
  };

  // The warm start's own placement is the first candidate for the best placement.
  if (!warm_start.empty()) {
    const Evaluated e = evaluate_one(groupings.front().levels.front(), warm_start);
    run.warm_start_step_time_s = e.penalised_s;
    run.warm_start_outcome = e.outcome;
    state.best_step_time_s = e.penalised_s;
    state.best_actions = refine(groupings.front(), 0, warm_start);
    consider_oom(e.outcome, state.best_actions);
  }
  // A resumed best that is OOM competes with this run's OOM placements: simulated once for its
  // overflow (not measured: a measure-cmd's "oom" has none to compare).
  if (run.resumed && options.measure_cmd.empty() && !state.best_actions.empty() &&
      state.best_step_time_s >= state.oom_step_time_s) {
    consider_oom(evaluate_one(base, state.best_actions).outcome, state.best_actions);
  }
  // The best placement seen, on the current level's groups: the self-imitation row.
  std::vector<int32_t> best_here;
  if (!state.best_actions.empty())
    best_here = coarsen_best(grouping_at(state.restarts), static_cast<int>(state.level),
                             state.best_actions);

  std::vector<double> uniforms;
  std::vector<int32_t> actions;
  std::vector<Outcome> outcomes(K);
  std::vector<Outcome> distinct_outcomes(K);
  std::vector<int> distinct;     // samples whose placement no earlier sample of the batch has
  std::vector<int> distinct_of;  // per sample: its placement's index in `distinct`
  std::vector<double> penalised(K);
  std::vector<double> advantages;
  const int64_t samples_at_start = state.samples;
  const int64_t updates_at_start = state.updates;
  double decoder_rows_sum = 0;  // see RlRun::decoder_rows_fraction
  double last_progress = -1e9;
  int64_t last_progress_update = -1;
  auto print_progress = [&](const CurvePoint& p, bool force) {
    if (!request.progress || p.update == last_progress_update) return;
    const double now = seconds_since(start);
    if (!force && now - last_progress < options.progress_seconds) return;
    last_progress = now;
    last_progress_update = p.update;
    const double total = std::max(p.policy_s + p.evaluate_s, 1e-12);
    print_to_stderr(
        "rl: update {} samples {} ({:.1f}/s) best {} mean {} oom {:.0f}% entropy {:.3f} "
        "policy {:.0f}% evaluate {:.0f}% level {} ({} groups{}) restarts {}\n",
        p.update, p.samples,
        static_cast<double>(p.samples - samples_at_start) / std::max(now, 1e-9),
        format_seconds(p.best_step_time_s), format_seconds(p.mean_step_time_s),
        100 * p.oom_fraction, p.entropy, 100 * p.policy_s / total, 100 * p.evaluate_s / total,
        p.level + 1, groupings[p.grouping].levels[p.level].num_groups,
        F > 1 ? ", " + groupings[p.grouping].name : std::string(), p.restarts);
  };
  auto save_checkpoint = [&] {
    if (options.checkpoint.empty()) return;
    TrainerState s = state;
    s.elapsed_s = state.elapsed_s + seconds_since(start);
    policy->save(options.checkpoint, s);
  };

  if (!options.curve.empty()) start_curve(options.curve, run.resumed, state.updates);

  // A small space is enumerated (RlOptions::enumerate): every placement of the base groups, in
  // mixed-radix order over each group's allowed devices, evaluated in batches of K.
  {
    std::vector<std::vector<int32_t>> choices(static_cast<size_t>(G_base));
    int64_t space = 1;
    for (int g = 0; g < G_base && space <= options.enumerate; ++g) {
      for (int d = 0; d < D; ++d) {
        if (base_features.allowed[static_cast<size_t>(g) * D + d]) choices[g].push_back(d);
      }
      space *= static_cast<int64_t>(choices[g].size());
    }
    if (space <= options.enumerate && (options.max_samples <= 0 || space <= options.max_samples)) {
      const auto t0 = Clock::now();
      std::vector<size_t> digit(static_cast<size_t>(G_base), 0);
      std::vector<std::vector<int32_t>> batch;
      int64_t done = 0;
      while (done < space && seconds_since(start) < request.budget_seconds) {
        batch.clear();
        for (; done < space && static_cast<int>(batch.size()) < K; ++done) {
          std::vector<int32_t>& row = batch.emplace_back(static_cast<size_t>(G_base));
          for (int g = 0; g < G_base; ++g) row[g] = choices[g][digit[g]];
          for (int g = 0; g < G_base && ++digit[g] == choices[g].size(); ++g) digit[g] = 0;
        }
        for (size_t j = 0; j < batch.size(); ++j) fill(placements[j], base, batch[j].data());
        source->evaluate(std::span<const Placement>(placements.data(), batch.size()),
                         std::span<Outcome>(outcomes.data(), batch.size()));
        raise_penalty(std::span<const Outcome>(outcomes.data(), batch.size()));
        for (size_t j = 0; j < batch.size(); ++j) {
          run.measure_timeouts += outcomes[j].timed_out;
          const double t = penalised_time(outcomes[j]);
          if (state.best_actions.empty() || t < state.best_step_time_s) {
            state.best_step_time_s = t;
            state.best_actions = batch[j];
          }
          consider_oom(outcomes[j], batch[j]);
        }
      }
      run.enumerated = space;
      run.enumerated_evaluated = done;
      run.evaluations += done;
      state.samples += done;
      run.evaluate_seconds += seconds_since(t0);
    }
  }

  size_t curve_written = 0;
  auto write_new_curve_rows = [&] {
    write_curve(options.curve,
                std::vector<CurvePoint>(run.curve.begin() + curve_written, run.curve.end()),
                run.groupings);
    curve_written = run.curve.size();
  };
  while (run.enumerated == 0) {
    if (options.max_samples > 0 && state.samples >= options.max_samples) break;
    if (seconds_since(start) >= request.budget_seconds) break;
    const int grouping_index = static_cast<int>(state.restarts % F);
    const Grouping& grouping = groupings[grouping_index];
    const int level = static_cast<int>(state.level);
    const Coarsening& groups = grouping.levels[level];
    const int G = static_cast<int>(groups.num_groups);

    // Sample K placements (uniforms from a per-update stream, so a resumed run continues exactly).
    auto t0 = Clock::now();
    Rng rng(request.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(state.updates) + 1);
    uniforms.resize(static_cast<size_t>(K) * G);
    for (double& u : uniforms) u = rng.uniform01();
    // Self-imitation: the best placement so far rides along as one more (forced) row.
    const double best_before = state.best_actions.empty() ? INFINITY : state.best_step_time_s;
    const bool best_before_fits = best_before < state.oom_step_time_s;
    const bool imitate_best = options.imitation > 0 && !best_here.empty();
    try {
      policy->sample(
          K, uniforms, actions,
          imitate_best ? std::span<const int32_t>(best_here) : std::span<const int32_t>());
    } catch (const PolicyDeadlinePassed&) {
      run.policy_seconds += seconds_since(t0);
      run.pass_cut = "the sampling of a batch";
      break;
    }
    run.policy_seconds += seconds_since(t0);

    t0 = Clock::now();
    // Identical samples (a converged policy draws its favourite placement again and again) are
    // evaluated once.
    distinct.clear();
    distinct_of.assign(K, 0);
    for (int k = 0; k < K; ++k) {
      const int32_t* row = actions.data() + static_cast<size_t>(k) * G;
      size_t j = 0;
      while (j < distinct.size() &&
             !std::equal(row, row + G, actions.data() + static_cast<size_t>(distinct[j]) * G)) {
        ++j;
      }
      if (j == distinct.size()) {
        fill(placements[j], groups, row);
        distinct.push_back(k);
      }
      distinct_of[k] = static_cast<int>(j);
    }
    source->evaluate(std::span<const Placement>(placements.data(), distinct.size()),
                     std::span<Outcome>(distinct_outcomes.data(), distinct.size()));
    for (int k = 0; k < K; ++k) outcomes[k] = distinct_outcomes[distinct_of[k]];
    run.evaluations += static_cast<int64_t>(distinct.size());
    for (size_t j = 0; j < distinct.size(); ++j)
      run.measure_timeouts += distinct_outcomes[j].timed_out;
    run.evaluate_seconds += seconds_since(t0);

    double mean_reward = 0;
    double mean_time = 0;
    double batch_best = INFINITY;
    int oom = 0;
    raise_penalty(std::span<const Outcome>(outcomes.data(), K));
    bool improved = false;
    for (int k = 0; k < K; ++k) {
      penalised[k] = penalised_time(outcomes[k]);
      oom += outcomes[k].feasible ? 0 : 1;
      mean_reward += reward_of(penalised[k]) / K;
      mean_time += penalised[k] / K;
      batch_best = std::min(batch_best, penalised[k]);
      if (state.best_actions.empty() || penalised[k] < state.best_step_time_s) {
        improved = true;
        state.best_step_time_s = penalised[k];
        best_here.assign(actions.begin() + static_cast<ptrdiff_t>(k) * G,
                         actions.begin() + static_cast<ptrdiff_t>(k + 1) * G);
        state.best_actions = refine(grouping, level, best_here);
      }
      if (least_overflow_so_far(outcomes[k])) {  // refined only when it is kept
        consider_oom(outcomes[k], refine(grouping, level,
                                         std::vector<int32_t>(
                                             actions.begin() + static_cast<ptrdiff_t>(k) * G,
                                             actions.begin() + static_cast<ptrdiff_t>(k + 1) * G)));
      }
    }
    const bool had_baseline = state.has_baseline;  // restored if the update is abandoned
    if (!state.has_baseline) {
      state.baseline = mean_reward;
      state.has_baseline = true;
    }
    advantages.assign(imitate_best ? K + 1 : K, 0.0);
    for (int k = 0; k < K; ++k) advantages[k] = reward_of(penalised[k]) - state.baseline;
    if (imitate_best) {
      advantages[K] =
          options.imitation *
          std::max(0.0, reward_of(best_before_fits ? best_before : state.oom_step_time_s) -
                            state.baseline);
    }
    if (options.normalize_advantages && K > 1) {
      double var = 0;
      for (int k = 0; k < K; ++k) {
        const double d = reward_of(penalised[k]) - mean_reward;
        var += d * d / (K - 1);
      }
      // The floor keeps a batch of (nearly) identical placements from blowing up rounding noise.
      const double scale = 1.0 / std::max(std::sqrt(var), 0.01 * std::abs(mean_reward) + 1e-12);
      for (double& a : advantages) a *= scale;
    }
    const double progress =
        options.entropy_samples > 0
            ? std::min(1.0, static_cast<double>(state.samples - state.samples_at_restart) /
                                static_cast<double>(options.entropy_samples))
            : 1.0;
    const double entropy_weight =
        options.entropy_weight + (options.entropy_final - options.entropy_weight) * progress;

    t0 = Clock::now();
    UpdateStats stats;
    try {
      stats = policy->update(actions, advantages, entropy_weight);
    } catch (const PolicyDeadlinePassed&) {
      // The batch was evaluated but not learned from: its best placement and any rise of the OOM
      // charge stand, its samples are not counted and the baseline is as before it, so a run
      // resumed from the final checkpoint draws the same batch again (and, knowing its best
      // already, may restart at another update than an uninterrupted run).
      state.has_baseline = had_baseline;
      run.policy_seconds += seconds_since(t0);
      run.pass_cut = fmt::format("the update of a batch (its {} samples were evaluated)", K);
      break;
    }
    run.policy_seconds += seconds_since(t0);
    decoder_rows_sum += stats.decoder_rows_fraction;

    state.baseline =
        options.baseline_decay * state.baseline + (1 - options.baseline_decay) * mean_reward;
    state.samples += K;
    ++state.updates;

    // A policy that has converged (entropy below restart_entropy) and has not found a new best
    // for restart_patience updates moves on: to the next finer level, warm-started on the best
    // placement, or, from the finest level, back to the coarsest with fresh weights (a restart),
    // of the next grouping when there are two.
    bool restarted = false;
    if (options.restart_patience > 0) {
      const bool stalled = stats.entropy < options.restart_entropy && !improved;
      state.stalled_updates = stalled ? state.stalled_updates + 1 : 0;
      if (state.stalled_updates >= options.restart_patience) {
        state.samples_at_restart = state.samples;
        state.stalled_updates = 0;
        state.has_baseline = false;
        t0 = Clock::now();
        if (level + 1 < static_cast<int>(grouping.levels.size())) {
          ++state.level;
          ++state.refinements;
          policy = policy_for_level(
              grouping, level + 1,
              request.seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(state.restarts) +
                  0xD1B54A32D192ED03ULL * static_cast<uint64_t>(state.level));
          best_here = coarsen_best(grouping, level + 1, state.best_actions);
          imitate(*policy, best_here);
        } else {
          ++state.restarts;
          state.level = 0;
          const Grouping& next = grouping_at(state.restarts);
          policy = policy_for_level(
              next, 0,
              request.seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(state.restarts));
          best_here = coarsen_best(next, 0, state.best_actions);
          restarted = true;
        }
        run.policy_seconds += seconds_since(t0);
      }
    }

    CurvePoint p;
    p.update = state.updates;
    p.samples = state.samples;
    p.elapsed_s = state.elapsed_s + seconds_since(start);
    p.mean_step_time_s = mean_time;
    p.batch_best_step_time_s = batch_best;
    p.best_step_time_s = state.best_step_time_s;
    p.oom_fraction = static_cast<double>(oom) / K;
    p.entropy = stats.entropy;
    p.baseline = state.baseline;
    p.policy_s = run.policy_seconds;
    p.evaluate_s = run.evaluate_seconds;
    p.restarts = state.restarts;
    p.level = level;
    p.grouping = grouping_index;
    run.curve.push_back(p);
    print_progress(p, restarted);

    // The curve is written before each checkpoint, so that a run resumed from it has every row
    // up to it (rows after it, written before an interruption, are dropped on resuming).
    const bool checkpoint_now =
        !options.checkpoint.empty() && state.updates % options.checkpoint_every == 0;
    if (!options.curve.empty() && (run.curve.size() - curve_written >= 50 ||
                                   (checkpoint_now && curve_written < run.curve.size()))) {
      write_new_curve_rows();
    }
    if (checkpoint_now) save_checkpoint();
  }

  // The greedy decoding of the final policy, returned if better than every sample (not after an
  // enumeration, which evaluated every placement). It may finish up to a tenth of the budget (at
  // most a second) after it, which at the default sizes it never needs (milliseconds). A
  // measurement started after the budget would be killed at once; it is not started, unless there
  // is no other placement.
  run.greedy_evaluated = false;
  if (run.enumerated == 0) {
    policy->set_deadline(deadline + steady_seconds(std::min(1.0, 0.1 * request.budget_seconds)));
    try {
      run.greedy_group_devices =
          refine(grouping_at(state.restarts), static_cast<int>(state.level), policy->greedy());
    } catch (const PolicyDeadlinePassed&) {
      run.greedy_abandoned = true;
    }
    run.greedy_evaluated =
        !run.greedy_abandoned && (state.best_actions.empty() || options.measure_cmd.empty() ||
                                  seconds_since(start) < request.budget_seconds);
  }
  if (run.greedy_evaluated) {
    const Evaluated e = evaluate_one(base, run.greedy_group_devices);
    run.greedy_step_time_s = e.penalised_s;
    if (state.best_actions.empty() || e.penalised_s < state.best_step_time_s) {
      state.best_step_time_s = e.penalised_s;
      state.best_actions = run.greedy_group_devices;
    }
    consider_oom(e.outcome, run.greedy_group_devices);
  }
  // Nothing sampled and no greedy decoding (the budget ran out inside the first passes): the
  // expert placement on the groups when there is one, else every group on the first device it
  // may use.
  if (state.best_actions.empty()) {
    std::vector<int32_t> fallback(static_cast<size_t>(G_base), 0);
    if (request.expert) {
      const Grouping& g = groupings.front();
      const int finest = static_cast<int>(g.levels.size()) - 1;
      fallback = refine(g, finest, project(g, finest, [&](OpId op) {
                          return static_cast<int32_t>((*request.expert)[op].value());
                        }));
      run.fallback = "the expert placement on the groups";
    } else {
      for (int g = 0; g < G_base; ++g) {
        int d = 0;
        while (!base_features.allowed[static_cast<size_t>(g) * D + d]) ++d;
        fallback[g] = d;
      }
      run.fallback = "every group on the first device it may use";
    }
    const Evaluated e = evaluate_one(base, fallback);
    state.best_step_time_s = e.penalised_s;
    state.best_actions = fallback;
    consider_oom(e.outcome, fallback);
  }
  // The curve first, then the checkpoint (as in the loop).
  if (!options.curve.empty() && curve_written < run.curve.size()) write_new_curve_rows();
  save_checkpoint();

  run.samples = state.samples;
  run.updates = state.updates;
  run.refinements = state.refinements;
  run.seconds = seconds_since(start);
  run.best_step_time_s = state.best_step_time_s;
  run.best_group_devices = state.best_actions;
  // An OOM best: the OOM placement with the least memory over capacity (after the checkpoint,
  // which keeps the best as the learning saw it).
  if (state.best_step_time_s >= state.oom_step_time_s && !least_overflow_actions.empty()) {
    run.best_group_devices = least_overflow_actions;
  }
  run.result.placement.device_of_op.resize(graph.num_ops());
  fill(run.result.placement, base, run.best_group_devices.data());
  {
    // The simulator's verdict on feasibility (also with measure-cmd, for the report).
    const SimResult r = simulator.run(run.result.placement);
    run.best_feasible = r.feasible;
  }
  // The distinct samples simulated and the placements evaluated one at a time.
  run.result.evaluations = run.evaluations + single_evaluations;
  const double sps =
      static_cast<double>(state.samples - samples_at_start) / std::max(run.seconds, 1e-9);
  if (state.updates > updates_at_start) {
    run.decoder_rows_fraction =
        decoder_rows_sum / static_cast<double>(state.updates - updates_at_start);
  }
  // "256 groups (levels 32/64/128/256)", or with two groupings "groupings merged 32/64/128/256
  // and apart 32/64/128/256, one per restart in turn (301 groups nested in both)".
  std::vector<std::string> level_lists;
  for (const Grouping& g : groupings) {
    std::string list = F > 1 ? g.name + " " : "";
    for (size_t i = 0; i < g.levels.size(); ++i) {
      list += (i == 0 ? "" : "/") + std::to_string(g.levels[i].num_groups);
    }
    level_lists.push_back(list);
  }
  const std::string grouping_text =
      F == 1 ? fmt::format("{} groups (levels {})", G_base, level_lists.front())
             : fmt::format("groupings {}, one per restart in turn ({} groups nested in all)",
                           fmt::join(level_lists, " and "), G_base);
  if (run.enumerated > 0) {
    run.result.note = fmt::format(
        "rl: only {} placements of the {} group{} (each on a device it may use), {} in {:.3f} s; "
        "nothing to learn",
        run.enumerated, G_base, G_base == 1 ? "" : "s",
        run.enumerated_evaluated == run.enumerated
            ? std::string("all evaluated")
            : fmt::format("{} evaluated before --budget-seconds ran out", run.enumerated_evaluated),
        run.seconds);
  } else {
    run.result.note = fmt::format(
        "rl: {}, {} samples ({:.1f}/s, {} distinct in their batch and evaluated; "
        "policy {:.0f}% / evaluation {:.0f}% of the time, decoder rows computed {:.0f}%), {} "
        "updates, {} refinements, {} restarts{}; groups: {} colocation, {} after the sole-consumer "
        "merge",
        grouping_text, state.samples - samples_at_start, sps, run.evaluations,
        100 * run.policy_seconds / std::max(run.policy_seconds + run.evaluate_seconds, 1e-12),
        100 * run.evaluate_seconds / std::max(run.policy_seconds + run.evaluate_seconds, 1e-12),
        100 * run.decoder_rows_fraction, state.updates - updates_at_start, state.refinements,
        state.restarts,
        run.resumed ? fmt::format(" (samples and updates of this run; resumed from a checkpoint at "
                                  "{} samples, {} updates)",
                                  samples_at_start, updates_at_start)
                    : std::string(),
        run.colocation_groups, run.after_sole_consumer);
  }
  if (run.measure_timeouts > 0) {
    run.result.note += fmt::format("; {} measurements killed at their time limit (charged as OOM)",
                                   run.measure_timeouts);
  }
  if (!options.measure_cmd.empty()) {
    // The step time printed with the result is the simulator's; say what was measured.
    if (state.best_step_time_s < state.oom_step_time_s) {
      run.result.note +=
          fmt::format("; best measured step time {}", format_seconds(state.best_step_time_s));
    } else if (run.evaluations == 0 && warm_start.empty()) {
      run.result.note +=
          "; nothing was measured before --budget-seconds ran out: the placement returned is not "
          "known to run";
    } else {
      run.result.note +=
          "; no measured placement fit (every measurement was OOM or killed): the placement "
          "returned is not known to run";
    }
  }
  if (!run.pass_cut.empty()) {
    run.result.note +=
        fmt::format("; --budget-seconds ran out during {}, which was abandoned", run.pass_cut);
  }
  if (run.greedy_abandoned) {
    run.result.note += "; the final greedy decoding was abandoned (the budget was spent)";
  } else if (!run.greedy_evaluated && run.enumerated == 0) {
    run.result.note += "; the final greedy placement was not measured (the budget was spent)";
  }
  if (!run.fallback.empty()) {
    run.result.note += fmt::format(
        "; nothing was sampled or decoded within the budget: returned {}", run.fallback);
  }
  if (!penalty_rises && state.oom_step_time_s > options.oom_step_time_s) {
    run.result.note +=
        fmt::format("; oom-time {} was raised to {}: a placement that fits took at least as long",
                    format_seconds(options.oom_step_time_s), format_seconds(state.oom_step_time_s));
  }
  if (!warm_start.empty()) {
    const Outcome& w = run.warm_start_outcome;
    run.result.note +=
        fmt::format("; warm start (expert on the groups) {}",
                    w.feasible    ? format_seconds(w.step_time_s)
                    : w.timed_out ? std::string("killed at its time limit or the budget's end")
                                  : std::string("OOM"));
  }
  if (!run.curve.empty()) print_progress(run.curve.back(), true);
  return run;
}

}  // namespace dplace::rl
