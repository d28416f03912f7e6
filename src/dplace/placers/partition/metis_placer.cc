// metis: METIS k-way partitioning (Karypis and Kumar, SIAM J. Sci. Comput. 1998) of the group
// graph.
#include <fcntl.h>
#include <metis.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "dplace/core/error.h"
#include "dplace/placers/common/memory.h"
#include "dplace/placers/common/params.h"
#include "dplace/placers/partition/partition_common.h"
#include "dplace/placers/partition/partition_placers.h"

namespace dplace {
namespace {

static_assert(sizeof(idx_t) == sizeof(int32_t), "dplace expects METIS built with 32-bit idx_t");

// METIS prints its complaints ("***Cannot bisect a graph with 0 vertices!", when a target's share
// is smaller than any group or there are more targets than groups) on standard output and still
// returns a partition, which would corrupt `--json` output. While one of these lives, file
// descriptor 1 points at /dev/null. Placers run one at a time, and dplace's own output is
// written after they return.
class StdoutSilenced {
 public:
  StdoutSilenced() {
    std::fflush(stdout);
    saved_ = dup(STDOUT_FILENO);
    const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved_ >= 0 && null_fd >= 0) dup2(null_fd, STDOUT_FILENO);
    if (null_fd >= 0) close(null_fd);
  }
  ~StdoutSilenced() {
    std::fflush(stdout);
    if (saved_ >= 0) {
      dup2(saved_, STDOUT_FILENO);
      close(saved_);
    }
  }
  StdoutSilenced(const StdoutSilenced&) = delete;
  StdoutSilenced& operator=(const StdoutSilenced&) = delete;

 private:
  int saved_ = -1;
};

class MetisPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    const PlacerParams params("metis", request.params, {"imbalance"});
    const double imbalance = params.get_double("imbalance", 0.05, 0.0, 1.0);
    const Cluster& cluster = *request.cluster;
    std::vector<DeviceId> targets;
    for (size_t d = 0; d < cluster.num_devices(); ++d) targets.push_back(DeviceId::from_index(d));
    const GroupGraph groups(*request.graph, cluster, *request.costs);
    PartitionProblem problem = build_partition_problem(groups, *request.costs, targets);

    std::vector<int32_t> part(problem.vertex_group.size(), 0);
    idx_t nvtxs = idx_t(part.size());
    idx_t nparts = idx_t(targets.size());
    if (nparts > 1 && nvtxs > 1) {
      idx_t ncon = 1;
      const double total =
          std::accumulate(problem.target_weight.begin(), problem.target_weight.end(), 0.0);
      std::vector<real_t> tpwgts;
      for (int32_t w : problem.target_weight) tpwgts.push_back(real_t(w / total));
      real_t ubvec = real_t(1.0 + imbalance);
      idx_t options[METIS_NOPTIONS];
      METIS_SetDefaultOptions(options);
      options[METIS_OPTION_NUMBERING] = 0;
      options[METIS_OPTION_SEED] = idx_t(metis_seed(request.seed));
      idx_t objval = 0;
      // METIS needs a 0-edge graph to have a non-null adjacency array.
      if (problem.adjncy.empty()) {
        problem.adjncy.push_back(0);
        problem.adjwgt.push_back(0);
      }
      const StdoutSilenced quiet;
      const int status = METIS_PartGraphKway(
          &nvtxs, &ncon, problem.xadj.data(), problem.adjncy.data(), problem.vwgt.data(), nullptr,
          problem.adjwgt.data(), &nparts, tpwgts.data(), &ubvec, options, &objval, part.data());
      DPLACE_CHECK(status == METIS_OK) << "METIS_PartGraphKway returned " << status;
    } else if (nvtxs == 1) {
      // Nothing to partition: the one vertex goes to the target of the largest share (the
      // fastest device), not to the first target.
      part[0] =
          int32_t(std::max_element(problem.target_weight.begin(), problem.target_weight.end()) -
                  problem.target_weight.begin());
    }
    return place_groups_with_repair(request, groups,
                                    assign_parts(problem, groups, *request.costs, part), "");
  }
};

}  // namespace

std::unique_ptr<Placer> make_metis_placer() { return std::make_unique<MetisPlacer>(); }

}  // namespace dplace
