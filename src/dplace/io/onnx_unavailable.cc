// The ONNX reader of a build without ONNX support (DPLACE_WITH_ONNX=OFF): every other format still
// loads; an ONNX file gives one clear error line.
#include "dplace/core/error.h"
#include "dplace/io/importers.h"

namespace dplace {

LoadedGraph read_onnx_file(const std::string& path, const ImportOptions& /*options*/) {
  throw ConfigError(path +
                    ": this dplace was built without ONNX support (DPLACE_WITH_ONNX=OFF); rebuild "
                    "with -DDPLACE_WITH_ONNX=ON (needs libonnx-dev and libprotobuf-dev)");
}

}  // namespace dplace
