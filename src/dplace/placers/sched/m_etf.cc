// m-etf: earliest task first under memory limits (Baechi, Jeon et al., SoCC 2020).
#include "dplace/placers/common/memory.h"
#include "dplace/placers/common/params.h"
#include "dplace/placers/sched/etf.h"
#include "dplace/placers/sched/sched_placers.h"

namespace dplace {
namespace {

class MEtfPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    const PlacerParams params("m-etf", request.params,
                              {"memory_fraction", "memory_retries", "devices"});
    const double fraction = params.get_double("memory_fraction", 1.0, 1e-6, 1.0);
    const int retries = static_cast<int>(params.get_int("memory_retries", 4, 0, 100));
    EtfOptions options;
    options.accelerators_only =
        params.get_choice("devices", "accelerators", {"accelerators", "all"}) == "accelerators";
    const GroupGraph groups(*request.graph, *request.cluster, *request.costs);
    return to_place_result(schedule_with_memory_retries(
        request, fraction, retries, [&](const std::vector<int64_t>& limits) {
          return run_etf(request, groups, limits, options);
        }));
  }
};

}  // namespace

std::unique_ptr<Placer> make_m_etf_placer() { return std::make_unique<MEtfPlacer>(); }

}  // namespace dplace
