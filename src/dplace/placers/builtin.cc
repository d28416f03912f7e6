#include "dplace/placers/builtin.h"

namespace dplace {

void register_builtin_placers() { register_baseline_placers(); }

}  // namespace dplace
