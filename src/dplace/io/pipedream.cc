// Reader for PipeDream graph.txt profiles (Narayanan et al., SOSP 2019; docs/importers.md).
//
// A file holds node lines and edge lines, in any order:
//   nodeN -- <module description> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
//            activation_size=<bytes or [b0; b1; ...]>, parameter_size=<bytes>
//   \tnodeA -- nodeB
// Each node becomes a forward op named by its id, typed by the description's leading identifier
// ("Conv2d", "LSTM", "__getitem__"; "Input0" -> "Input"), with one output per activation size and
// the measured forward time on GPUs and accelerators (the profiles were taken on a GPU; nothing
// tells a CPU's time, so ops may run only on those kinds). An edge into `__getitem__(k)` from a
// node with several outputs carries output k; any other edge from such a node carries every output.
// In training mode (the default: profiles carry backward times) each node that has inputs, weights
// or backward work also gets a backward op grad/<id> with the measured backward time, colocated
// with its forward op, reading the gradients of its forward op's consumers and its own forward
// outputs (the stashed activations), and producing one gradient per input tensor whose producer
// has a backward op.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/files.h"
#include "dplace/io/importers.h"

namespace dplace {
namespace {

constexpr double kSecondsPerMillisecond = 1e-3;

struct ProfileNode {
  std::string id;
  std::string description;
  std::string type;
  double forward_ms = 0;
  double backward_ms = 0;
  std::vector<int64_t> activation_bytes;
  int64_t parameter_bytes = 0;
  int line = 0;
};

struct ProfileEdge {
  std::string from;
  std::string to;
  int line = 0;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

class ProfileParser {
 public:
  explicit ProfileParser(std::string path) : path_(std::move(path)) {}

  void parse(std::istream& in) {
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);  // UTF-8 BOM
      if (trim(line).empty()) continue;
      if (line[0] == '\t' || line[0] == ' ') {
        parse_edge(trim(line), number);
      } else {
        parse_node(line, number);
      }
    }
    if (nodes_.empty()) fail(0, "no node lines: not a PipeDream graph.txt profile");
  }

  std::vector<ProfileNode> nodes_;
  std::vector<ProfileEdge> edges_;

 private:
  [[noreturn]] void fail(int line, const std::string& message) const {
    throw FormatError(path_ + (line > 0 ? ":" + std::to_string(line) : "") + ": " + message);
  }

  void parse_edge(std::string_view text, int line) {
    size_t sep = text.find(" -- ");
    if (sep == std::string_view::npos) fail(line, "edge line is not 'nodeA -- nodeB'");
    ProfileEdge e{std::string(trim(text.substr(0, sep))), std::string(trim(text.substr(sep + 4))),
                  line};
    if (e.from.empty() || e.to.empty() || e.to.find(" -- ") != std::string::npos) {
      fail(line, "edge line is not 'nodeA -- nodeB'");
    }
    edges_.push_back(std::move(e));
  }

  double parse_number(std::string_view text, const std::string& node, std::string_view field,
                      int line) const {
    text = trim(text);
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() ||
        !std::isfinite(value) || value < 0) {
      fail(line, "node '" + node + "': field '" + std::string(field) + "': expected a " +
                     "non-negative number, got '" + std::string(text) + "'");
    }
    return value;
  }

  int64_t parse_bytes(std::string_view text, const std::string& node, std::string_view field,
                      int line) const {
    double v = parse_number(text, node, field, line);
    if (v > 9.0e18)
      fail(line, "node '" + node + "': field '" + std::string(field) + "': too large");
    return static_cast<int64_t>(std::llround(v));
  }

  void parse_node(const std::string& text, int line) {
    size_t first = text.find(" -- ");
    size_t last = text.rfind(" -- ");
    if (first == std::string::npos || last == first) {
      fail(line, "node line is not 'nodeN -- description -- metrics'");
    }
    ProfileNode n;
    n.id = std::string(trim(std::string_view(text).substr(0, first)));
    n.description = std::string(trim(std::string_view(text).substr(first + 4, last - first - 4)));
    n.line = line;
    if (n.id.empty()) fail(line, "node line without an id");
    size_t ident = 0;
    while (ident < n.description.size() &&
           (std::isalnum(static_cast<unsigned char>(n.description[ident])) ||
            n.description[ident] == '_')) {
      ++ident;
    }
    n.type = n.description.substr(0, ident);
    if (n.type.rfind("Input", 0) == 0 &&
        std::all_of(n.type.begin() + 5, n.type.end(), [](char c) { return std::isdigit(c); })) {
      n.type = "Input";
    }
    std::map<std::string, std::string, std::less<>> fields;
    std::string_view metrics = std::string_view(text).substr(last + 4);
    if (std::count(metrics.begin(), metrics.end(), '[') !=
        std::count(metrics.begin(), metrics.end(), ']')) {
      fail(line, "node '" + n.id + "': unbalanced '[' ']' in its metrics (truncated line?)");
    }
    // Split on commas outside [...] lists.
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= metrics.size(); ++i) {
      if (i < metrics.size() && metrics[i] == '[') ++depth;
      if (i < metrics.size() && metrics[i] == ']') --depth;
      if (i == metrics.size() || (metrics[i] == ',' && depth == 0)) {
        std::string_view item = trim(metrics.substr(start, i - start));
        start = i + 1;
        if (item.empty()) continue;
        size_t eq = item.find('=');
        if (eq == std::string_view::npos) {
          fail(line, "node '" + n.id + "': metric '" + std::string(item) + "' is not key=value");
        }
        fields[std::string(trim(item.substr(0, eq)))] = std::string(trim(item.substr(eq + 1)));
      }
    }
    auto field = [&](std::string_view key) -> const std::string& {
      auto it = fields.find(key);
      if (it == fields.end()) {
        fail(line, "node '" + n.id + "': field '" + std::string(key) + "' is missing");
      }
      return it->second;
    };
    n.forward_ms = parse_number(field("forward_compute_time"), n.id, "forward_compute_time", line);
    n.backward_ms =
        parse_number(field("backward_compute_time"), n.id, "backward_compute_time", line);
    n.parameter_bytes = parse_bytes(field("parameter_size"), n.id, "parameter_size", line);
    std::string_view activation = field("activation_size");
    if (!activation.empty() && activation.front() == '[') {
      if (activation.back() != ']') {
        fail(line, "node '" + n.id + "': field 'activation_size': unterminated list");
      }
      std::string_view items = activation.substr(1, activation.size() - 2);
      size_t pos = 0;
      while (pos <= items.size()) {
        size_t semi = items.find(';', pos);
        if (semi == std::string_view::npos) semi = items.size();
        n.activation_bytes.push_back(
            parse_bytes(items.substr(pos, semi - pos), n.id, "activation_size", line));
        pos = semi + 1;
      }
    } else {
      n.activation_bytes.push_back(parse_bytes(activation, n.id, "activation_size", line));
    }
    nodes_.push_back(std::move(n));
  }

  std::string path_;
};

// Output index an edge into `consumer` carries from a producer with `outputs` outputs: k for
// "__getitem__(k)" with k in range, nullopt (every output) otherwise.
std::optional<uint32_t> getitem_index(const ProfileNode& consumer, size_t outputs) {
  if (outputs <= 1) return 0;
  std::string_view d = consumer.description;
  constexpr std::string_view kPrefix = "__getitem__(";
  if (d.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  d.remove_prefix(kPrefix.size());
  uint32_t k = 0;
  auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), k);
  if (ec != std::errc() || end == d.data() + d.size() || *end != ')' || k >= outputs) {
    return std::nullopt;
  }
  return k;
}

std::vector<TimeOverride> measured(double ms) {
  double s = ms * kSecondsPerMillisecond;
  return {{"gpu", s}, {"accel", s}};
}

LoadedGraph build_graph(const std::string& path, const ProfileParser& profile, bool training) {
  const auto& nodes = profile.nodes_;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!index.emplace(nodes[i].id, i).second) {
      throw FormatError(path + ":" + std::to_string(nodes[i].line) + ": node '" + nodes[i].id +
                        "' is defined twice");
    }
  }
  // Forward inputs of each node, in edge order.
  std::vector<std::vector<TensorRef>> inputs(nodes.size());
  std::vector<std::vector<std::pair<size_t, TensorRef>>> consumers(nodes.size());
  for (const ProfileEdge& e : profile.edges_) {
    auto from = index.find(e.from);
    auto to = index.find(e.to);
    if (from == index.end() || to == index.end()) {
      throw FormatError(path + ":" + std::to_string(e.line) + ": edge " + e.from + " -- " + e.to +
                        ": no node '" + (from == index.end() ? e.from : e.to) + "'");
    }
    size_t outputs = nodes[from->second].activation_bytes.size();
    std::optional<uint32_t> k = getitem_index(nodes[to->second], outputs);
    auto producer = OpId::from_index(from->second);
    for (uint32_t out = 0; out < outputs; ++out) {
      if (k && *k != out) continue;
      TensorRef t{producer, out};
      inputs[to->second].push_back(t);
      consumers[from->second].push_back({to->second, t});
    }
  }

  std::string name = path;
  if (auto slash = name.find_last_of('/'); slash != std::string::npos)
    name = name.substr(slash + 1);
  for (std::string_view suffix : {".graph.txt", ".txt"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      name = name.substr(0, name.size() - suffix.size());
      break;
    }
  }
  GraphBuilder builder(name, path);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ProfileNode& n = nodes[i];
    Op op;
    op.name = n.id;
    op.type = n.type;
    op.inputs = inputs[i];
    op.output_bytes = n.activation_bytes;
    op.param_bytes = n.parameter_bytes;
    op.devices = {"gpu", "accel"};
    op.time_s = measured(n.forward_ms);
    op.phase = Phase::kForward;
    if (training) op.colocate = n.id;
    op.extra = Json::object({{"description", n.description}});
    builder.add_op(std::move(op));
  }
  if (training) {
    // Backward ops, in reverse file order of their forward nodes.
    std::vector<bool> has_grad(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      has_grad[i] = !inputs[i].empty() || nodes[i].parameter_bytes > 0 || nodes[i].backward_ms > 0;
    }
    std::vector<OpId> grad_op(nodes.size());
    size_t next_id = nodes.size();
    for (size_t i = nodes.size(); i-- > 0;) {
      if (has_grad[i]) grad_op[i] = OpId::from_index(next_id++);
    }
    // Gradient outputs of grad/<i>: one per distinct input tensor whose producer has a gradient.
    std::vector<std::vector<TensorRef>> grad_outputs(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (const TensorRef& t : inputs[i]) {
        if (!has_grad[t.op.value()]) continue;
        auto& outs = grad_outputs[i];
        if (std::find(outs.begin(), outs.end(), t) == outs.end()) outs.push_back(t);
      }
    }
    for (size_t i = nodes.size(); i-- > 0;) {
      if (!has_grad[i]) continue;
      const ProfileNode& n = nodes[i];
      Op op;
      op.name = "grad/" + n.id;
      op.type = n.type + "Grad";
      for (const auto& [consumer, tensor] : consumers[i]) {
        if (!has_grad[consumer]) continue;
        const auto& outs = grad_outputs[consumer];
        auto k = static_cast<uint32_t>(std::find(outs.begin(), outs.end(), tensor) - outs.begin());
        TensorRef g{grad_op[consumer], k};
        if (std::find(op.inputs.begin(), op.inputs.end(), g) == op.inputs.end()) {
          op.inputs.push_back(g);
        }
      }
      for (uint32_t k = 0; k < n.activation_bytes.size(); ++k) {
        op.inputs.push_back({OpId::from_index(i), k});
      }
      op.output_bytes.clear();
      for (const TensorRef& t : grad_outputs[i]) {
        op.output_bytes.push_back(nodes[t.op.value()].activation_bytes[t.output]);
      }
      if (op.output_bytes.empty()) op.output_bytes.push_back(0);
      op.devices = {"gpu", "accel"};
      op.time_s = measured(n.backward_ms);
      op.phase = Phase::kBackward;
      op.colocate = n.id;
      OpId id = builder.add_op(std::move(op));
      DPLACE_CHECK(id == grad_op[i]) << "backward op ids out of step";
    }
  }
  return LoadedGraph{std::move(builder).build(), std::nullopt, {}, "pipedream"};
}

}  // namespace

LoadedGraph read_pipedream_file(const std::string& path, const ImportOptions& options) {
  check_input_path(path);
  std::ifstream in(path);
  if (!in) throw FormatError(path + ": cannot open");
  ProfileParser parser(path);
  parser.parse(in);
  LoadedGraph loaded = build_graph(path, parser, options.training.value_or(true));
  if (!options.dims.empty()) {
    loaded.warnings.push_back(path + ": --dim has no effect on a PipeDream profile");
  }
  return loaded;
}

}  // namespace dplace
