// load_graph_file: detects a graph file's format from its content and dispatches to its reader.
//
// Detection, on the first bytes of the file (after a UTF-8 byte-order mark and white space):
//   '{'                      JSON: "format": "dplace.graph/1" -> graph_json (expanded by
//                            expand_training when ImportOptions::training is set); an object with
//                            "nodes", "edges" and "maxFPGAs" -> dnn-partitioning; else an error
//                            naming what the JSON lacks.
//   "nodeN -- ... -- ..."    PipeDream graph.txt profile.
//   a protobuf ModelProto    ONNX (first byte is the tag of a ModelProto field: 0x08 ir_version,
//   tag, or a .onnx name     0x12 producer_name, ..., 0x3a graph). A file named *.onnx always goes
//                            to the ONNX reader, so a damaged one gets the ONNX reader's message.
#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

#include "dplace/core/error.h"
#include "dplace/core/files.h"
#include "dplace/core/json.h"
#include "dplace/io/dnn_partitioning.h"
#include "dplace/io/graph_json.h"
#include "dplace/io/importers.h"
#include "dplace/ir/training.h"

namespace dplace {
namespace {

constexpr size_t kHeadBytes = 4096;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view skip_bom_and_space(std::string_view s) {
  if (s.substr(0, 3) == "\xEF\xBB\xBF") s.remove_prefix(3);
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  return s;
}

// The first line starts "node" and has the " -- " separator twice.
bool looks_like_pipedream(std::string_view text) {
  if (text.substr(0, 4) != "node") return false;
  std::string_view line = text.substr(0, text.find('\n'));
  size_t first = line.find(" -- ");
  return first != std::string_view::npos && line.find(" -- ", first + 4) != std::string_view::npos;
}

// The first byte is the tag of a field ModelProto defines, with that field's wire type.
bool looks_like_onnx(std::string_view head) {
  if (head.empty()) return false;
  static constexpr std::array<unsigned char, 9> kSingleByteTags = {
      0x08,  // 1 ir_version (varint)
      0x12,  // 2 producer_name
      0x1a,  // 3 producer_version
      0x22,  // 4 domain
      0x28,  // 5 model_version (varint)
      0x32,  // 6 doc_string
      0x3a,  // 7 graph
      0x42,  // 8 opset_import
      0x72,  // 14 metadata_props
  };
  auto first = static_cast<unsigned char>(head[0]);
  for (unsigned char tag : kSingleByteTags) {
    if (first == tag) return true;
  }
  // 20 training_info, 25 functions: two-byte tags.
  return head.size() >= 2 && static_cast<unsigned char>(head[1]) == 0x01 &&
         (first == 0xa2 || first == 0xca);
}

// REQUIRES: check_input_path(path) passed (load_graph_file).
std::string read_head(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path + ": cannot open (missing or unreadable file)");
  std::string head;
  std::string block(kHeadBytes, '\0');
  // Past leading white space, which may be longer than one block (a JSON graph with 4,096 spaces
  // before its '{' was "unrecognised").
  while (skip_bom_and_space(head).empty()) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    if (in.gcount() <= 0) break;
    head.append(block, 0, static_cast<size_t>(in.gcount()));
  }
  if (head.empty()) throw FormatError(path + ": empty file");
  return head;
}

LoadedGraph load_json(const std::string& path, const ImportOptions& options) {
  Json doc = read_json_file(path);
  if (doc.is_object() && doc.contains("format")) {
    const Json& format = doc["format"];
    if (format.is_string() && format.get<std::string>() == kGraphFormat) {
      Graph graph = read_graph_json(doc, path);
      if (options.training.value_or(false)) {
        try {
          graph = expand_training(graph);
        } catch (const GraphError& e) {
          throw GraphError(path + ": --training: " + e.what());
        }
      }
      if (options.training == false) {
        // Taking the forward part out of a training graph is not implemented: refuse rather
        // than place the whole step while the user believes it is the forward pass.
        for (const Op& op : graph.ops()) {
          if (op.phase != Phase::kBackward && op.phase != Phase::kUpdate) continue;
          throw ConfigError(fmt::format(
              "{}: --inference: graph '{}': op '{}' has phase '{}'; the file holds a training "
              "graph, which is read as written (drop --inference)",
              path, graph.name(), op.name, phase_name(op.phase)));
        }
      }
      LoadedGraph loaded{std::move(graph), std::nullopt, {}, kGraphFormat};
      if (!options.dims.empty()) {
        loaded.warnings.push_back(path + ": --dim has no effect on a " + kGraphFormat +
                                  " graph (its sizes are given in bytes)");
      }
      return loaded;
    }
    throw FormatError(
        path + ": field 'format': " +
        (format.is_string() ? "'" + format.get<std::string>() + "'" : "a non-string") +
        " is not a graph format (expected '" + kGraphFormat + "')");
  }
  if (is_dnn_partitioning_json(doc)) return read_dnn_partitioning_file(path, options);
  throw FormatError(path + ": JSON is neither a " + kGraphFormat +
                    " graph (no \"format\" field) nor a dnn-partitioning workload (needs "
                    "\"nodes\", \"edges\" and \"maxFPGAs\")");
}

}  // namespace

LoadedGraph load_graph_file(const std::string& path, const ImportOptions& options) {
  // The format is told from the first bytes, then the reader opens the file again (ONNX maps it):
  // a pipe read that way looked empty ("<(cat g.json)") and a FIFO hung. Refused before opening.
  check_input_path(path);
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw FormatError(path +
                      ": not a regular file (a pipe, FIFO or device); a graph file is read more "
                      "than once: save it to a file first");
  }
  std::string head = read_head(path);
  std::string_view text = skip_bom_and_space(head);
  if (!text.empty() && text.front() == '{') return load_json(path, options);
  if (looks_like_pipedream(text)) return read_pipedream_file(path, options);
  if (ends_with(path, ".onnx") || looks_like_onnx(head)) return read_onnx_file(path, options);
  throw FormatError(path +
                    ": unrecognised graph format: expected an ONNX model, a dplace.graph/1 or "
                    "dnn-partitioning JSON file, or a PipeDream graph.txt profile");
}

}  // namespace dplace
