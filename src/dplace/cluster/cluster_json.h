// dplace.cluster/1 reading and writing (docs/formats.md).
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "dplace/cluster/cluster.h"
#include "dplace/core/json.h"

namespace dplace {

// Parses a dplace.cluster/1 document. `source` names the file in errors. Throws FormatError for a
// wrong or missing `format`, a missing or mistyped field, and ConfigError (via Cluster) for
// semantic problems such as an empty device list; every message names the device or link.
Cluster parse_cluster_json(const Json& doc, const std::string& source);
Cluster read_cluster_file(const std::string& path);
Json cluster_to_json(const Cluster& cluster);

}  // namespace dplace
