// Registration hooks of the built-in placers. register_builtin_placers() calls one hook per
// sub-directory; a new family of placers adds its hook here and in builtin.cc.
#pragma once

#include <memory>
#include <string>

#include "dplace/placers/placer.h"

namespace dplace {

void register_builtin_placers();

// baseline/: single-cpu, single-gpu, single:<device>, expert, round-robin.
void register_baseline_placers();
// Every op on the named device; the device is resolved (and checked) at place() time.
std::unique_ptr<Placer> make_single_device_placer(const std::string& device_name);
// Colocation groups in topological order dealt to the accelerators in turn.
std::unique_ptr<Placer> make_round_robin_placer();

// partition/: scotch, mincut, metis (graph partitioners on the group quotient graph).
void register_partition_placers();
// sched/: heft, m-topo, m-etf, m-sct (list schedulers; the m-* ones after Baechi).
void register_sched_placers();
// search/: anneal (simulated annealing with the simulator as objective).
void register_search_placers();
// post/: post (cross-entropy minimisation and PPO over per-group softmax distributions).
void register_post_placers();
// hsdag/: hsdag (a graph neural network with graph-parsing clusters, trained by REINFORCE).
void register_hsdag_placers();
// hierarchical/: hierarchical (the 2018 hierarchical planner: a learned grouper and a seq2seq
// placer trained jointly by REINFORCE).
void register_hierarchical_placers();
// rl/: rl (reinforcement learning; only when built with DPLACE_WITH_TORCH).
void register_rl_placers();

}  // namespace dplace
