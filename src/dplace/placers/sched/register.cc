#include "dplace/placers/builtin.h"
#include "dplace/placers/sched/sched_placers.h"

namespace dplace {

void register_sched_placers() {
  register_placer({"heft", "HEFT list scheduling: upward rank, earliest finish time with transfers",
                   false, true, make_heft_placer});
  register_placer({"m-topo", "Baechi m-TOPO: topological order, fill each GPU to a memory share",
                   false, true, make_m_topo_placer});
  register_placer({"m-etf", "Baechi m-ETF: earliest task first under device memory limits", false,
                   true, make_m_etf_placer});
  register_placer({"m-sct", "Baechi m-SCT: ETF with favourite children from an LP (Clp)", false,
                   true, make_m_sct_placer});
}

}  // namespace dplace
