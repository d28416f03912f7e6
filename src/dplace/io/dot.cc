#include "dplace/io/dot.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/files.h"

extern char** environ;

namespace dplace {

namespace {

// ColorBrewer "Set3": twelve light colours that black text reads well on.
constexpr const char* kPalette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072",
                                    "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
                                    "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);
constexpr const char* kUnplacedColour = "#ffffff";
constexpr const char* kCrossDeviceEdgeColour = "#d62728";
// Pictures past either size have dot's layout passes capped (see write_dot).
constexpr size_t kBigPictureNodes = 150;
constexpr size_t kBigPictureEdges = 600;

const char* colour_of(DeviceId d) {
  return d.valid() ? kPalette[d.value() % kPaletteSize] : kUnplacedColour;
}

// Longest name written into a label before it is cut: Graphviz refuses a quoted string of more
// than 16,384 bytes (a valid graph may name an op with more), and a longer label is unreadable.
constexpr size_t kMaxNameBytes = 200;

// A DOT double-quoted string body: quotes and backslashes escaped, newlines as spaces, other ASCII
// control characters as the text \xNN (Graphviz copied them into SVG, where XML does not allow
// them); a text of more than kMaxNameBytes is cut there (at a UTF-8 character boundary) and ends
// in "...".
std::string escape(std::string_view text) {
  if (text.size() > kMaxNameBytes) {
    size_t cut = kMaxNameBytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return escape(text.substr(0, cut)) + "...";
  }
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r') {
      out += ' ';
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\\\x{:02x}", byte);
    } else {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
  }
  return out;
}

enum class Level { kOps, kGroups, kScopes };

// The nodes of the picture and which node each op belongs to.
struct Picture {
  Level level = Level::kOps;
  size_t scope_depth = 0;  // for kScopes
  std::vector<uint32_t> node_of_op;
  std::vector<std::string> label;  // escaped; lines joined with "\\n"
  std::vector<DeviceId> device;    // first op's device; invalid when unplaced
  std::vector<bool> mixed;         // ops on more than one device
  std::vector<uint32_t> num_ops;
};

// The op name up to (not including) its depth-th '/'; the whole name when it has fewer.
std::string_view scope_prefix(std::string_view name, size_t depth) {
  size_t pos = 0;
  for (size_t k = 0; k < depth; ++k) {
    pos = name.find('/', pos);
    if (pos == std::string_view::npos) return name;
    if (k + 1 < depth) ++pos;
  }
  return depth == 0 ? std::string_view() : name.substr(0, pos);
}

DeviceId device_of(const Placement* placement, size_t op) {
  return placement ? placement->device_of_op[op] : DeviceId::invalid();
}

// Fills label-independent per-node data from node_of_op.
void finish_nodes(Picture& p, size_t num_nodes, const Placement* placement) {
  p.device.assign(num_nodes, DeviceId::invalid());
  p.mixed.assign(num_nodes, false);
  p.num_ops.assign(num_nodes, 0);
  std::vector<bool> seen(num_nodes, false);
  for (size_t i = 0; i < p.node_of_op.size(); ++i) {
    const uint32_t n = p.node_of_op[i];
    const DeviceId d = device_of(placement, i);
    if (!seen[n]) {
      seen[n] = true;
      p.device[n] = d;
    } else if (p.device[n] != d) {
      p.mixed[n] = true;
    }
    ++p.num_ops[n];
  }
}

Picture make_picture(const Graph& graph, const Placement* placement, size_t max_nodes) {
  Picture p;
  const size_t n = graph.num_ops();
  p.node_of_op.resize(n);
  // Past kBigPictureNodes ops, colocated ops are drawn as their group when they have one: a
  // training graph drawn op by op is deep (forward, then backward), and its long forward-to-
  // backward edges made dot take a minute (nmt --seq 2, 381 ops, 61 s); as groups the same
  // picture is as shallow as the forward pass.
  const bool colocated = graph.num_groups() < n;
  if (n <= max_nodes && (n <= kBigPictureNodes || !colocated)) {
    p.level = Level::kOps;
    for (size_t i = 0; i < n; ++i) {
      p.node_of_op[i] = static_cast<uint32_t>(i);
      const Op& op = graph.op(OpId::from_index(i));
      p.label.push_back(op.type.empty() ? escape(op.name)
                                        : escape(op.name) + "\\n" + escape(op.type));
    }
    finish_nodes(p, n, placement);
    return p;
  }
  if (graph.num_groups() <= max_nodes) {
    p.level = Level::kGroups;
    for (size_t i = 0; i < n; ++i) p.node_of_op[i] = graph.group_of(OpId::from_index(i)).value();
    finish_nodes(p, graph.num_groups(), placement);
    for (size_t g = 0; g < graph.num_groups(); ++g) {
      p.label.push_back(fmt::format(
          "{}\\n({} ops)", escape(graph.group_name(GroupId::from_index(g))), p.num_ops[g]));
    }
    return p;
  }
  // Scopes: the deepest prefix depth that fits.
  size_t max_depth = 0;
  for (const Op& op : graph.ops()) {
    max_depth = std::max<size_t>(max_depth, std::count(op.name.begin(), op.name.end(), '/') + 1);
  }
  p.level = Level::kScopes;
  for (size_t depth = max_depth;; --depth) {
    std::map<std::pair<std::string_view, uint32_t>, uint32_t> index;  // ordered: stable output
    for (size_t i = 0; i < n; ++i) {
      const std::string_view scope = scope_prefix(graph.op(OpId::from_index(i)).name, depth);
      const DeviceId d = device_of(placement, i);
      index.emplace(std::make_pair(scope, d.valid() ? d.value() : DeviceId::kInvalidValue), 0);
      if (index.size() > max_nodes && depth > 0) break;
    }
    if (index.size() > max_nodes && depth > 0) continue;
    uint32_t next = 0;
    for (auto& [key, id] : index) id = next++;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view scope = scope_prefix(graph.op(OpId::from_index(i)).name, depth);
      const DeviceId d = device_of(placement, i);
      p.node_of_op[i] = index.at({scope, d.valid() ? d.value() : DeviceId::kInvalidValue});
    }
    finish_nodes(p, index.size(), placement);
    for (const auto& [key, id] : index) {
      const std::string scope = key.first.empty() ? std::string("(all ops)") : escape(key.first);
      p.label.push_back(fmt::format("{}\\n({} ops)", scope, p.num_ops[id]));
    }
    p.scope_depth = depth;
    return p;
  }
}

struct Edge {
  uint32_t from;
  uint32_t to;
  double bytes;
};

std::vector<Edge> picture_edges(const Graph& graph, const Picture& p) {
  std::unordered_map<uint64_t, double> bytes;
  std::vector<uint32_t> counted;  // consumer nodes already counted for the current tensor
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    const OpId op = OpId::from_index(i);
    const uint32_t from = p.node_of_op[i];
    for (uint32_t k = 0; k < graph.num_outputs(op); ++k) {
      const TensorRef t{op, k};
      counted.clear();
      for (OpId c : graph.consumers(t)) {
        const uint32_t to = p.node_of_op[c.value()];
        if (to == from || std::find(counted.begin(), counted.end(), to) != counted.end()) continue;
        counted.push_back(to);
        bytes[(static_cast<uint64_t>(from) << 32) | to] +=
            static_cast<double>(graph.tensor_bytes(t));
      }
    }
  }
  std::vector<Edge> edges;
  edges.reserve(bytes.size());
  for (const auto& [key, b] : bytes) {
    edges.push_back({static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key), b});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.from != b.from ? a.from < b.from : a.to < b.to;
  });
  return edges;
}

std::string lowercase_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// Full path of an executable: `program` itself when it contains '/', else the first match on PATH.
std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return ::access(program.c_str(), X_OK) == 0 ? program : "";
  }
  const char* path_env = std::getenv("PATH");
  std::stringstream dirs(path_env ? path_env : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + program;
    std::error_code ec;
    if (::access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate, ec)) {
      return candidate;
    }
  }
  return "";
}

// A fresh temporary file "<tmp>/dplace-XXXXXX<suffix>"; returns its path and open descriptor.
std::pair<std::string, int> make_temp_file(const std::string& suffix) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) {
    const char* tmpdir = std::getenv("TMPDIR");
    throw ConfigError(fmt::format("cannot create a temporary file: TMPDIR '{}': {}",
                                  tmpdir ? tmpdir : "", ec.message()));
  }
  std::string name = (dir / ("dplace-XXXXXX" + suffix)).string();
  std::vector<char> buffer(name.begin(), name.end());
  buffer.push_back('\0');
  const int fd = ::mkstemps(buffer.data(), static_cast<int>(suffix.size()));
  if (fd < 0) {
    throw ConfigError(
        fmt::format("{}: cannot create a temporary file: {}", name, std::strerror(errno)));
  }
  return {std::string(buffer.data()), fd};
}

void write_text_file(const std::string& path, std::string_view text) {
  if (const std::string why = write_file_whole(path, text); !why.empty()) {
    throw FormatError(fmt::format("{}: cannot write file ({})", path, why));
  }
}

// Runs `dot -T<format> -o <path> <dot file>`; its stderr is kept for the error message.
void render_with_graphviz(const std::string& text, const std::string& format,
                          const std::string& path, const DotOptions& options) {
  const std::string dot = find_program(options.dot_program);
  if (dot.empty()) {
    throw ConfigError(fmt::format(
        "{}: cannot render .{}: Graphviz '{}' is not installed (not found on PATH); install "
        "graphviz or write a .dot file instead",
        path, format, options.dot_program));
  }
  struct Cleanup {  // removes every temporary file made, whatever fails later
    std::vector<std::string> paths;
    ~Cleanup() {
      std::error_code ec;
      for (const std::string& p : paths) std::filesystem::remove(p, ec);
    }
  } cleanup;
  auto [dot_path, dot_fd] = make_temp_file(".dot");
  cleanup.paths.push_back(dot_path);
  ::close(dot_fd);
  // Graphviz renders into a temporary file, written to `path` whole once it has succeeded: a
  // failed or killed render does not leave half a picture over the previous one.
  auto [rendered_path, rendered_fd] = make_temp_file("." + format);
  cleanup.paths.push_back(rendered_path);
  ::close(rendered_fd);
  auto [err_path, err_fd] = make_temp_file(".err");
  cleanup.paths.push_back(err_path);
  try {
    write_text_file(dot_path, text);
  } catch (...) {
    ::close(err_fd);
    throw;
  }

  const std::string type_flag = "-T" + format;
  std::vector<std::string> args = {dot, type_flag, "-o", rendered_path, dot_path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawn_error = ::posix_spawn(&pid, dot.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(err_fd);
  if (spawn_error != 0) {
    throw ConfigError(
        fmt::format("{}: cannot run Graphviz '{}': {}", path, dot, std::strerror(spawn_error)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::ifstream rendered(rendered_path, std::ios::binary);
    std::stringstream picture;
    picture << rendered.rdbuf();
    if (!rendered || rendered.bad()) {
      throw ConfigError(fmt::format("{}: cannot read Graphviz's output {}", path, rendered_path));
    }
    write_text_file(path, picture.view());
    return;
  }
  std::ifstream err(err_path);
  std::string first_line;
  std::getline(err, first_line);
  const std::string how = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                            : std::string("killed by a signal");
  throw ConfigError(fmt::format("{}: Graphviz '{}' failed ({}){}{}", path, dot, how,
                                first_line.empty() ? "" : ": ", escape(first_line)));
}

}  // namespace

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  std::string number;
  if (unit == 0 || bytes >= 100) {
    number = fmt::format("{:.0f}", bytes);
  } else {
    number = bytes >= 10 ? fmt::format("{:.1f}", bytes) : fmt::format("{:.2f}", bytes);
    while (number.back() == '0') number.pop_back();
    if (number.back() == '.') number.pop_back();
  }
  return number + " " + kUnits[unit];
}

std::string graph_to_dot(const Graph& graph, const Cluster* cluster, const Placement* placement,
                         const DotOptions& options) {
  DPLACE_CHECK(options.max_nodes >= 1) << "DotOptions::max_nodes must be >= 1";
  if (placement) {
    DPLACE_CHECK(cluster != nullptr) << "a placement needs its cluster";
    DPLACE_CHECK(placement->device_of_op.size() == graph.num_ops())
        << "placement has " << placement->device_of_op.size() << " entries for " << graph.num_ops()
        << " ops";
    for (DeviceId d : placement->device_of_op) {
      DPLACE_CHECK(d.valid() && d.value() < cluster->num_devices()) << "bad device id";
    }
  }
  const Picture p = make_picture(graph, placement, options.max_nodes);
  const std::vector<Edge> edges = picture_edges(graph, p);

  std::string title = escape(graph.name().empty() ? "graph" : graph.name());
  if (cluster) title += " on " + escape(cluster->name());
  switch (p.level) {
    case Level::kOps:
      break;
    case Level::kGroups:
      title +=
          fmt::format("\\n{} ops shown as {} colocation groups", graph.num_ops(), p.label.size());
      break;
    case Level::kScopes:
      title += fmt::format("\\n{} ops shown as {} name scopes (depth {}){}", graph.num_ops(),
                           p.label.size(), p.scope_depth, placement ? " per device" : "");
      break;
  }

  std::string out;
  out += fmt::format("digraph \"{}\" {{\n", escape(graph.name()));
  // Big pictures cap dot's network-simplex and crossing-minimisation passes: a 349-node picture
  // took 59 s of CPU without the caps and 4 s with them.
  // gnmt8's 136 name scopes have 856 edges: 13.6 s of CPU without the caps.
  const bool big = p.label.size() > kBigPictureNodes || edges.size() > kBigPictureEdges;
  out += fmt::format(
      "  graph [rankdir=TB, newrank=true, fontname=\"Helvetica\", fontsize=14, labelloc=t, "
      "label=\"{}\"{}];\n",
      title, big ? ", nslimit=2, nslimit1=2, mclimit=0.2, searchsize=20" : "");
  out +=
      "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
      "fontname=\"Helvetica\", fontsize=10];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\", arrowsize=0.6];\n";

  // Legend: one box per device with its colour and op count.
  if (placement) {
    std::vector<size_t> ops_on(cluster->num_devices(), 0);
    for (DeviceId d : placement->device_of_op) ++ops_on[d.value()];
    out +=
        "  subgraph cluster_legend {\n    label=\"devices\"; style=\"rounded\"; "
        "color=\"#999999\";\n";
    std::string rank = "    { rank=same;";
    for (size_t i = 0; i < cluster->num_devices(); ++i) {
      const DeviceId d = DeviceId::from_index(i);
      out += fmt::format("    legend_{} [label=\"{}\\n{} ops\", fillcolor=\"{}\"];\n", i,
                         escape(cluster->device(d).name), ops_on[i], colour_of(d));
      rank += fmt::format(" legend_{};", i);
    }
    out += rank + " }\n";
    // Invisible edges keep the legend in cluster order, left to right.
    for (size_t i = 0; i + 1 < cluster->num_devices(); ++i) {
      out += fmt::format("    legend_{} -> legend_{} [style=invis];\n", i, i + 1);
    }
    out += "  }\n";
  }

  // Colocation groups of more than one op, when ops are drawn one by one.
  std::vector<bool> in_cluster(p.label.size(), false);
  if (p.level == Level::kOps) {
    for (size_t g = 0; g < graph.num_groups(); ++g) {
      const auto members = graph.group_ops(GroupId::from_index(g));
      if (members.size() < 2) continue;
      out += fmt::format(
          "  subgraph cluster_g{} {{\n    label=\"{}\"; style=\"dashed,rounded\"; "
          "color=\"#666666\"; fontsize=10;\n",
          g, escape(graph.group_name(GroupId::from_index(g))));
      for (OpId op : members) {
        const uint32_t node = p.node_of_op[op.value()];
        in_cluster[node] = true;
        out += fmt::format("    n{} [label=\"{}\", fillcolor=\"{}\"{}];\n", node, p.label[node],
                           colour_of(p.device[node]),
                           p.mixed[node] ? ", style=\"rounded,dashed,filled\"" : "");
      }
      out += "  }\n";
    }
  }
  for (size_t node = 0; node < p.label.size(); ++node) {
    if (in_cluster[node]) continue;
    out += fmt::format("  n{} [label=\"{}\", fillcolor=\"{}\"{}];\n", node, p.label[node],
                       colour_of(p.device[node]),
                       p.mixed[node] ? ", style=\"rounded,dashed,filled\"" : "");
  }

  for (const Edge& e : edges) {
    std::string attrs;
    if (options.edge_labels) attrs += fmt::format("label=\"{}\"", format_bytes(e.bytes));
    const DeviceId a = p.device[e.from];
    const DeviceId b = p.device[e.to];
    if (a.valid() && b.valid() && a != b) {
      attrs += fmt::format("{}penwidth=2, color=\"{}\"", attrs.empty() ? "" : ", ",
                           kCrossDeviceEdgeColour);
    }
    out += fmt::format("  n{} -> n{}{}{}{};\n", e.from, e.to, attrs.empty() ? "" : " [", attrs,
                       attrs.empty() ? "" : "]");
  }
  out += "}\n";
  return out;
}

void write_dot(const Graph& graph, const Cluster& cluster, const Placement* placement,
               const std::string& path, const DotOptions& options) {
  const std::string text = graph_to_dot(graph, &cluster, placement, options);
  const std::string ext = lowercase_extension(path);
  if (ext == ".svg" || ext == ".png" || ext == ".pdf") {
    render_with_graphviz(text, ext.substr(1), path, options);
  } else {
    write_text_file(path, text);
  }
}

}  // namespace dplace
