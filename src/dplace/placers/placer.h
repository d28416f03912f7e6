// The Placer interface and registry.
//
// A placer maps a graph onto a cluster. Callers use the non-virtual place(), which checks the
// request, calls the private place_impl(), then checks that the returned placement is valid
// (every op assigned, allowed devices, colocation, links) with DPLACE_CHECK: an invalid result is
// a bug in the placer. Whether the placement fits in memory is a property of the result, judged by
// the simulator; a memory-aware placer that found nothing feasible says why in
// PlaceResult::infeasible_reason.
//
// Clusters with unlinked device pairs (no `links` entry and no default_link): a placer that does
// not declare handles_missing_links() is refused such a cluster with a ConfigError naming the pair,
// before it runs; one that does (the single-device placers, expert, anneal) runs, and a result that
// needs a missing link (e.g. an expert placement across the pair) is a ConfigError, not a bug.
//
// Registry: make_placer(name) builds a fresh placer by name; register_builtin_placers() runs once
// on first use and adds every placer of this module (each sub-directory has a register_* hook).
//
// Thread safety: a Placer object is used by one thread at a time; the registry is thread-safe to
// read after first use.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dplace/cluster/cluster.h"
#include "dplace/cost/cost_model.h"
#include "dplace/ir/graph.h"
#include "dplace/sim/placement.h"
#include "dplace/sim/simulator.h"

namespace dplace {

struct PlaceRequest {
  const Graph* graph = nullptr;          // REQUIRES: non-null
  const Cluster* cluster = nullptr;      // REQUIRES: non-null
  const CostTable* costs = nullptr;      // REQUIRES: non-null, built from graph and cluster
  const Simulator* simulator = nullptr;  // REQUIRES: non-null, built from the three above
  uint64_t seed = 1;           // Default: 1. Randomised placers are deterministic per seed.
  double budget_seconds = 60;  // Default: 60. Wall-clock cap for search placers.
  bool progress = false;       // Default: false. Progress lines on stderr.
  // The model's hand-crafted placement (model zoo) or one read with --placement; may be absent.
  std::optional<Placement> expert;
  // Placer-specific options as key=value strings (e.g. "groups" -> "256"); unknown keys are an
  // error reported by the placer that receives them.
  std::map<std::string, std::string> params;
  // Set by a search for the placers it runs as its starts (anneal): a placer whose run time grows
  // past seconds on large clusters (the ETF engine of m-etf and m-sct: ops x ready ops x devices;
  // heft and m-topo: ops x devices) throws DeadlinePassed once past it (check_deadline, every 64
  // ops placed). Others ignore it. Default: none.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// Thrown by a placer that gave up at PlaceRequest::deadline.
struct DeadlinePassed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws DeadlinePassed ("stopped at its deadline at step S of N") when request.deadline is set
// and past; looks at the clock only at steps 63, 127, ... (a step is one op taken by the placer's
// loop), so a graph of fewer than 64 ops is always placed.
void check_deadline(const PlaceRequest& request, size_t step, size_t total);

struct PlaceResult {
  Placement placement;
  int64_t evaluations = 0;        // simulations the placer ran
  std::string infeasible_reason;  // empty unless the placer knows no feasible placement exists
  std::string note;               // optional one-line remark for the user
};

class Placer {
 public:
  virtual ~Placer() = default;
  // Runs the placer. Throws ConfigError for a bad request (e.g. no expert placement for `expert`,
  // or a cluster with an unlinked pair of devices that this placer cannot handle).
  PlaceResult place(const PlaceRequest& request);

  // The name it was built under by make_placer ("placer" when built otherwise).
  const std::string& name() const { return name_; }
  // Whether it reads PlaceRequest::expert (expert, anneal's and rl's warm starts); the CLI refuses
  // `place --placement FILE` for the others. Default: false.
  virtual bool uses_expert_placement() const { return false; }

 private:
  friend std::unique_ptr<Placer> make_placer(const std::string& name);

  virtual PlaceResult place_impl(const PlaceRequest& request) = 0;
  // Whether place_impl copes with device pairs that have no link: it never relies on moving a
  // tensor across such a pair (its result may still need one, which place() reports). Default:
  // false.
  virtual bool handles_missing_links() const { return false; }

  std::string name_ = "placer";
};

struct PlacerInfo {
  std::string name;
  std::string description;         // one line
  bool randomised = false;         // takes --seed
  bool in_default_compare = true;  // part of `dplace compare` without --placers
  std::function<std::unique_ptr<Placer>()> factory;
};

void register_placer(PlacerInfo info);
// All registered placers, sorted by name.
std::vector<PlacerInfo> list_placers();
// Throws ConfigError listing the known names when `name` is unknown. Names of the form
// "single:<device>" build a single-device placer for that device.
std::unique_ptr<Placer> make_placer(const std::string& name);

}  // namespace dplace
