#include "dplace/placers/common/learning_params.h"

namespace dplace {

std::vector<std::string> learning_grouping_keys() {
  return {"groups", "sole-consumer",      "sole-consumer-limit",
          "cap",    "cap-transfer-scale", "shared-weights"};
}

std::vector<std::string> polish_keys() { return {"polish", "polish-share", "polish-rounds"}; }

std::vector<std::string> run_control_keys() {
  return {"samples", "restart-patience", "threads", "curve"};
}

LearningRunControls run_controls_from_params(const PlacerParams& p,
                                             int64_t restart_patience_default) {
  LearningRunControls r;
  r.max_samples = p.get_int("samples", 0, 0, int64_t{1} << 50);
  r.restart_patience = p.get_int("restart-patience", restart_patience_default, 0, int64_t{1} << 40);
  r.threads = static_cast<size_t>(p.get_int("threads", 0, 0, 256));
  r.curve = p.get_file("curve");
  return r;
}

LearningGroupingOptions learning_grouping_from_params(
    const PlacerParams& p, int64_t max_groups, const std::vector<std::string>& shared_weights,
    const std::string& shared_weights_default) {
  LearningGroupingOptions g;
  g.groups = static_cast<size_t>(p.get_int("groups", 256, 2, max_groups));
  g.sole_consumer =
      p.get_choice("sole-consumer", g.sole_consumer, {"full", "chains", "limited", "off"});
  g.sole_consumer_limit = p.get_double("sole-consumer-limit", g.sole_consumer_limit, 1e-9, 1e12);
  g.cap = p.get_choice("cap", g.cap, {"lightest", "communication"});
  g.cap_transfer_scale = p.get_double("cap-transfer-scale", g.cap_transfer_scale, 0, 1e12);
  g.shared_weights = p.get_choice("shared-weights", shared_weights_default, shared_weights);
  g.levels = 1;
  return g;
}

PolishOptions polish_from_params(const PlacerParams& p) {
  PolishOptions o;
  o.evaluations = p.get_int("polish", o.evaluations, -1, int64_t{1} << 40);
  o.share = p.get_double("polish-share", o.share, 0, 0.9);
  o.rounds = static_cast<int>(p.get_int("polish-rounds", o.rounds, 1, 1000));
  return o;
}

}  // namespace dplace
