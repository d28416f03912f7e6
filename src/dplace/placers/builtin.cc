#include "dplace/placers/builtin.h"

namespace dplace {

void register_builtin_placers() {
  register_baseline_placers();
  register_partition_placers();
  register_sched_placers();
  register_search_placers();
  register_post_placers();
  register_hsdag_placers();
  register_hierarchical_placers();
#ifdef DPLACE_WITH_TORCH
  register_rl_placers();
#endif
}

}  // namespace dplace
