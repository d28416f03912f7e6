#include "dplace/placers/builtin.h"
#include "dplace/placers/partition/partition_placers.h"

namespace dplace {

void register_partition_placers() {
  register_placer({"scotch",
                   "Scotch static mapping of the group graph onto the cluster (2017 paper)", true,
                   true, make_scotch_placer});
  register_placer({"mincut", "the 2017 paper's MinCut: Scotch mapping without the CPU", true, true,
                   make_mincut_placer});
  register_placer({"metis", "METIS k-way partitioning, part sizes by device speed", true, true,
                   make_metis_placer});
}

}  // namespace dplace
