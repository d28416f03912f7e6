// Registration of placer `rl`: the learning (rl_placer.h) followed by the polishing (RlOptions::
// polish_evaluations, polish_rounds) with polish_learned's whole-device moves and simulated
// annealing (search/anneal.h). Compiled into dplace_placers (not dplace_rl) so that the Torch
// library depends on the placer interface's headers only and the polishing can use another placer
// of this module; built only with DPLACE_WITH_TORCH.
#include <chrono>

#include "dplace/placers/builtin.h"
#include "dplace/placers/rl/rl_placer.h"
#include "dplace/placers/rl/torch_module.h"
#include "dplace/placers/search/anneal.h"

namespace dplace {
namespace {

class RlPlacer final : public Placer {
  bool uses_expert_placement() const override { return true; }  // --param init=expert

  PlaceResult place_impl(const PlaceRequest& request) override {
    const rl::RlOptions options = rl::rl_options_from_params(request.params);
    rl::load_torch_module();  // before the clock, as in run_rl
    const auto start = std::chrono::steady_clock::now();
    const int64_t moves = options.polish_evaluations >= 0
                              ? options.polish_evaluations
                              : kPolishFactor * default_anneal_evaluations(*request.graph);
    if (moves == 0) return rl::run_rl(request, options).result;

    PlaceRequest learn = request;
    learn.budget_seconds = request.budget_seconds * (1 - options.polish_share);
    const rl::RlRun run = rl::run_rl(learn, options);
    const PlaceResult& learned = run.result;
    // A space of colocation groups enumerated to the end is the annealing's whole space too.
    if (run.enumerated > 0 && run.enumerated_evaluated == run.enumerated &&
        run.base_groups == run.colocation_groups) {
      PlaceResult exact = learned;
      exact.note += "; no polishing (the annealing's moves are of the same groups)";
      return exact;
    }

    return polish_learned(request, "rl", learned, start,
                          AnnealOptions{.evaluations = moves,
                                        .rounds = options.polish_rounds,
                                        .threads = options.threads,
                                        .progress_label = "rl: polishing"});
  }
};

}  // namespace

void register_rl_placers() {
  register_placer({"rl",
                   "REINFORCE-trained seq2seq policy (Mirhoseini et al. 2017) over nested "
                   "groupings, coarse to fine, then polished by annealing; --param groups=N, "
                   "levels=N, samples=N, polish=N, checkpoint=PATH, curve=FILE.csv, "
                   "measure-cmd='CMD {placement}'",
                   true, false, [] { return std::make_unique<RlPlacer>(); }});
}

}  // namespace dplace
