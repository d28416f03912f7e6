#include "dplace/placers/builtin.h"

namespace dplace {

void register_builtin_placers() {
  register_baseline_placers();
  register_partition_placers();
  register_sched_placers();
  register_search_placers();
}

}  // namespace dplace
