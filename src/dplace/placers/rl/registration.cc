// Registration of placer `rl`. Compiled into dplace_placers (not dplace_rl) so that the Torch
// library depends on the placer interface's headers only; built only with DPLACE_WITH_TORCH.
#include "dplace/placers/builtin.h"
#include "dplace/placers/rl/rl_placer.h"

namespace dplace {
namespace {

class RlPlacer final : public Placer {
  PlaceResult place_impl(const PlaceRequest& request) override {
    return rl::run_rl(request, rl::rl_options_from_params(request.params)).result;
  }
};

}  // namespace

void register_rl_placers() {
  register_placer({"rl",
                   "REINFORCE-trained seq2seq policy (Mirhoseini et al. 2017) over nested "
                   "groupings, coarse to fine; --param groups=N, levels=N, samples=N, "
                   "checkpoint=PATH, curve=FILE.csv, measure-cmd='CMD {placement}'",
                   true, false, [] { return std::make_unique<RlPlacer>(); }});
}

}  // namespace dplace
