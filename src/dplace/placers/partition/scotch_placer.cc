// scotch and mincut: libscotch static mapping (Pellegrini and Roman, HPCN 1996; the 2017 paper's
// Scotch and MinCut baselines).
#include <fmt/format.h>
#include <scotch.h>

#include <cmath>
#include <mutex>

#include "dplace/core/error.h"
#include "dplace/placers/common/memory.h"
#include "dplace/placers/common/params.h"
#include "dplace/placers/partition/partition_common.h"
#include "dplace/placers/partition/partition_placers.h"

namespace dplace {
namespace {

// Each mapping runs in its own libscotch context; the lock guards what remains global in the
// library (error handling, the default context that graphs are created in).
std::mutex& scotch_mutex() {
  static std::mutex m;
  return m;
}

SCOTCH_Num strategy_flag(const std::string& name) {
  if (name == "quality") return SCOTCH_STRATQUALITY;
  if (name == "speed") return SCOTCH_STRATSPEED;
  if (name == "balance") return SCOTCH_STRATBALANCE;
  return SCOTCH_STRATDEFAULT;
}

// Owns the libscotch objects of one mapping.
class ScotchMapping {
 public:
  ScotchMapping() {
    SCOTCH_contextInit(&context_);
    SCOTCH_graphInit(&graph_);
    SCOTCH_graphInit(&bound_graph_);
    SCOTCH_graphInit(&target_graph_);
    SCOTCH_graphInit(&bound_target_graph_);
    SCOTCH_archInit(&arch_);
    SCOTCH_stratInit(&arch_strat_);
    SCOTCH_stratInit(&map_strat_);
  }
  ~ScotchMapping() {
    SCOTCH_stratExit(&map_strat_);
    SCOTCH_stratExit(&arch_strat_);
    SCOTCH_archExit(&arch_);
    SCOTCH_graphExit(&bound_target_graph_);  // context graphs before their context
    SCOTCH_graphExit(&bound_graph_);
    SCOTCH_contextExit(&context_);
    SCOTCH_graphExit(&target_graph_);
    SCOTCH_graphExit(&graph_);
  }
  ScotchMapping(const ScotchMapping&) = delete;
  ScotchMapping& operator=(const ScotchMapping&) = delete;

  // Returns the target index of every vertex.
  std::vector<int32_t> map(const PartitionProblem& p, const Cluster& cluster,
                           const std::string& strategy, double imbalance, uint64_t seed) {
    // Determinism: libscotch 7 partitions with several threads by default, and the result then
    // varies from run to run. One thread, a private random state seeded from --seed.
    DPLACE_CHECK(SCOTCH_contextOptionSetNum(&context_, SCOTCH_OPTIONNUMDETERMINISTIC, 1) == 0);
    DPLACE_CHECK(SCOTCH_contextOptionSetNum(&context_, SCOTCH_OPTIONNUMRANDOMFIXEDSEED, 1) == 0);
    DPLACE_CHECK(SCOTCH_contextRandomClone(&context_) == 0) << "SCOTCH_contextRandomClone failed";
    SCOTCH_contextRandomSeed(&context_, SCOTCH_Num(scotch_seed(seed)));
    SCOTCH_contextRandomReset(&context_);
    DPLACE_CHECK(SCOTCH_contextThreadSpawn(&context_, 1, nullptr) == 0)
        << "SCOTCH_contextThreadSpawn failed";
    const SCOTCH_Num nv = SCOTCH_Num(p.vertex_group.size());
    const SCOTCH_Num k = SCOTCH_Num(p.targets.size());
    DPLACE_CHECK(SCOTCH_graphBuild(&graph_, 0, nv, p.xadj.data(), nullptr, p.vwgt.data(), nullptr,
                                   SCOTCH_Num(p.adjncy.size()), p.adjncy.data(),
                                   p.adjwgt.data()) == 0)
        << "SCOTCH_graphBuild failed";
    DPLACE_CHECK(SCOTCH_graphCheck(&graph_) == 0) << "SCOTCH_graphCheck failed";
    DPLACE_CHECK(SCOTCH_contextBindGraph(&context_, &graph_, &bound_graph_) == 0)
        << "SCOTCH_contextBindGraph failed";

    // Target architecture: devices weighted by speed; a link's cost is inversely proportional to
    // its bandwidth (mean of both directions' 1/bandwidth), 10 for the fastest link.
    std::vector<double> inv_bw;
    double best_inv_bw = 0;
    for (SCOTCH_Num a = 0; a < k; ++a) {
      for (SCOTCH_Num b = 0; b < k; ++b) {
        double inv = 0;
        if (a != b) {
          const Link* ab = cluster.link(p.targets[a], p.targets[b]);
          const Link* ba = cluster.link(p.targets[b], p.targets[a]);
          if (ab && ba) {
            inv = 0.5 / ab->bandwidth_bytes_per_s + 0.5 / ba->bandwidth_bytes_per_s;
          } else if (ab || ba) {
            inv = 1.0 / (ab ? ab : ba)->bandwidth_bytes_per_s;
          }
          if (inv > 0 && (best_inv_bw == 0 || inv < best_inv_bw)) best_inv_bw = inv;
        }
        inv_bw.push_back(inv);
      }
    }
    target_vert_.assign(1, 0);
    for (SCOTCH_Num a = 0; a < k; ++a) {
      for (SCOTCH_Num b = 0; b < k; ++b) {
        const double inv = inv_bw[a * k + b];
        if (a == b || inv == 0) continue;
        target_edge_.push_back(b);
        target_cost_.push_back(
            std::max<SCOTCH_Num>(1, SCOTCH_Num(std::lround(10 * inv / best_inv_bw))));
      }
      target_vert_.push_back(SCOTCH_Num(target_edge_.size()));
    }
    DPLACE_CHECK(SCOTCH_graphBuild(&target_graph_, 0, k, target_vert_.data(), nullptr,
                                   p.target_weight.data(), nullptr, SCOTCH_Num(target_edge_.size()),
                                   target_edge_.data(), target_cost_.data()) == 0)
        << "SCOTCH_graphBuild (target) failed";
    DPLACE_CHECK(SCOTCH_contextBindGraph(&context_, &target_graph_, &bound_target_graph_) == 0)
        << "SCOTCH_contextBindGraph (target) failed";
    if (SCOTCH_archBuild0(&arch_, &bound_target_graph_, 0, nullptr, &arch_strat_) != 0) {
      throw ConfigError(fmt::format(
          "placer 'scotch': could not build a target architecture from cluster '{}' (are some "
          "devices unreachable from each other?)",
          cluster.name()));
    }
    DPLACE_CHECK(SCOTCH_stratGraphMapBuild(&map_strat_, strategy_flag(strategy), k, imbalance) == 0)
        << "SCOTCH_stratGraphMapBuild failed";
    std::vector<SCOTCH_Num> part(p.fixed.begin(), p.fixed.end());
    DPLACE_CHECK(SCOTCH_graphMapFixed(&bound_graph_, &arch_, &map_strat_, part.data()) == 0)
        << "SCOTCH_graphMapFixed failed";
    return std::vector<int32_t>(part.begin(), part.end());
  }

 private:
  SCOTCH_Context context_;
  SCOTCH_Graph graph_;
  SCOTCH_Graph bound_graph_;  // graph_ seen through context_
  SCOTCH_Graph target_graph_;
  SCOTCH_Graph bound_target_graph_;
  SCOTCH_Arch arch_;
  SCOTCH_Strat arch_strat_;
  SCOTCH_Strat map_strat_;
  std::vector<SCOTCH_Num> target_vert_, target_edge_, target_cost_;
};

class ScotchPlacer final : public Placer {
 public:
  explicit ScotchPlacer(bool without_cpu) : without_cpu_(without_cpu) {
    // The headers and the shared library must agree on the integer width (Debian ships
    // 32-bit SCOTCH_Num headers by default).
    DPLACE_CHECK(sizeof(SCOTCH_Num) == size_t(SCOTCH_numSizeof()))
        << "scotch.h has " << sizeof(SCOTCH_Num) << "-byte SCOTCH_Num, libscotch "
        << SCOTCH_numSizeof();
  }

 private:
  PlaceResult place_impl(const PlaceRequest& request) override {
    const char* name = without_cpu_ ? "mincut" : "scotch";
    const PlacerParams params(name, request.params, {"imbalance", "strategy"});
    const double imbalance = params.get_double("imbalance", 0.05, 0.0, 1.0);
    const std::string strategy =
        params.get_choice("strategy", "quality", {"default", "quality", "speed", "balance"});
    const Cluster& cluster = *request.cluster;

    std::vector<DeviceId> targets;
    for (size_t d = 0; d < cluster.num_devices(); ++d) {
      const DeviceId id = DeviceId::from_index(d);
      if (!without_cpu_ || cluster.device(id).kind != DeviceKind::kCpu) targets.push_back(id);
    }
    std::string note;
    if (targets.empty()) {
      for (size_t d = 0; d < cluster.num_devices(); ++d) targets.push_back(DeviceId::from_index(d));
      note = "the cluster has only CPUs: mapped onto all of them";
    }
    const GroupGraph groups(*request.graph, cluster, *request.costs);
    const PartitionProblem problem = build_partition_problem(groups, *request.costs, targets);
    std::vector<int32_t> part(problem.vertex_group.size(), 0);
    if (targets.size() > 1 && !part.empty()) {
      std::lock_guard<std::mutex> lock(scotch_mutex());
      ScotchMapping mapping;
      part = mapping.map(problem, cluster, strategy, imbalance, request.seed);
    }
    return place_groups_with_repair(request, groups,
                                    assign_parts(problem, groups, *request.costs, part), note);
  }

  bool without_cpu_;
};

}  // namespace

std::unique_ptr<Placer> make_scotch_placer() { return std::make_unique<ScotchPlacer>(false); }
std::unique_ptr<Placer> make_mincut_placer() { return std::make_unique<ScotchPlacer>(true); }

}  // namespace dplace
