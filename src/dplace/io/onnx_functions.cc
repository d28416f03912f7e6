#include "dplace/io/onnx_functions.h"

#include <fmt/format.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/format.h"
#include "dplace/io/onnx_common.h"

namespace dplace::onnx_detail {
namespace {

namespace pb = ::google::protobuf;

// More nodes than any real model has; functions that call each other several times per level
// would otherwise expand exponentially.
constexpr double kMaxInlinedNodes = 2'000'000;
// Calls nested deeper than this are refused: real exporters nest modules a few levels deep, and
// the expansion recurses once per level.
constexpr int kMaxCallDepth = 64;

// Fields newer than this libonnx's proto, read from the unknown fields.
constexpr int kNodeOverloadField = 8;             // NodeProto.overload (IR 10)
constexpr int kFunctionAttributeProtoField = 11;  // FunctionProto.attribute_proto (IR 9)
constexpr int kFunctionOverloadField = 13;        // FunctionProto.overload (IR 10)

// Built against a libonnx that knows these fields, the unknown-field reads would find nothing and
// defaults and overloads would be lost without a word.
template <typename Function>
constexpr bool kKnowsOverloads = requires {
  Function::kOverloadFieldNumber;
};
static_assert(!kKnowsOverloads<ox::FunctionProto>,
              "this libonnx has FunctionProto.overload: read it and attribute_proto directly");

// The length-delimited unknown fields `number` of a message, in order.
std::vector<std::string> unknown_strings(const pb::UnknownFieldSet& fields, int number) {
  std::vector<std::string> values;
  for (int i = 0; i < fields.field_count(); ++i) {
    const pb::UnknownField& f = fields.field(i);
    if (f.number() == number && f.type() == pb::UnknownField::TYPE_LENGTH_DELIMITED) {
      values.push_back(f.length_delimited());
    }
  }
  return values;
}

std::string overload_of(const pb::UnknownFieldSet& fields, int number) {
  std::vector<std::string> values = unknown_strings(fields, number);
  return values.empty() ? std::string() : values.back();
}

std::string function_key(const std::string& domain, const std::string& name,
                         const std::string& overload) {
  std::string key = canonical_domain(domain);
  key += '\0';
  key += name;
  key += '\0';
  key += overload;
  return key;
}

// How a node is named in errors: by its name, else by its type and first output.
std::string node_label(const ox::NodeProto& node) {
  if (!node.name().empty()) return "node '" + node.name() + "' (" + node.op_type() + ")";
  const std::string first = node.output_size() > 0 ? node.output(0) : std::string();
  return "the " + node.op_type() + " node writing '" + first + "'";
}

enum class Checked { kNo, kActive, kYes };

// What inlining the calls in a node makes: the nodes it stands for, its subgraphs' included, and
// the calls themselves (a double: a deep tree of calls overflows any integer); and how deep the
// calls in it nest.
struct Expansion {
  double size = 0;
  int depth = 0;
  void add(const Expansion& e) {
    size += e.size;
    depth = std::max(depth, e.depth);
  }
};

// A model-local function, indexed.
struct LocalFunction {
  const ox::FunctionProto* proto = nullptr;
  std::string label;  // NodeOrigin::function
  // Read on first use (checked): a function no node calls is not read.
  Checked checked = Checked::kNo;
  std::unordered_map<std::string, ox::AttributeProto> defaults;
  std::set<std::string> body_names;    // the outputs of the body's own nodes
  std::vector<std::string> all_names;  // and those its subgraphs define: what a call prefixes
  Expansion body;                      // of its body's nodes
  bool opsets_merged = false;
};

using Scope = std::unordered_map<std::string, std::string>;

class Inliner {
 public:
  Inliner(ox::ModelProto& model, std::string path) : model_(model), path_(std::move(path)) {}

  std::vector<NodeOrigin> run() {
    index_functions();
    for (const auto& o : model_.opset_import()) {
      opsets_.emplace(canonical_domain(o.domain()), OpsetSource{o.version(), "the model"});
    }
    const ox::GraphProto& main = model_.graph();
    add_graph_names(main, taken_);
    double nodes = 0;
    double largest = 0;
    const ox::NodeProto* largest_call = nullptr;
    for (const ox::NodeProto& node : main.node()) {
      const double size = expansion(node, 0).size;
      nodes += size;
      if (callee(node) != nullptr && size > largest) {
        largest = size;
        largest_call = &node;
      }
    }
    if (nodes > kMaxInlinedNodes) {
      fail(
          fmt::format("inlining the model's functions would take {:.3g} calls and nodes, more "
                      "than {} ({} alone takes {:.3g})",
                      nodes, kMaxInlinedNodes, node_label(*largest_call), largest));
    }
    std::vector<NodeOrigin> origins;
    inline_graph(*model_.mutable_graph(), &origins);
    model_.clear_functions();
    return origins;
  }

 private:
  struct OpsetSource {
    int64_t version = 0;
    std::string source;  // "the model", or "function 'X'" for a domain a function added
  };

  [[noreturn]] void fail(const std::string& message) const {
    throw FormatError(path_ + ": " + one_line(message));
  }

  void index_functions() {
    functions_.reserve(static_cast<size_t>(model_.functions_size()));
    for (const ox::FunctionProto& fn : model_.functions()) {
      if (fn.name().empty()) continue;  // no node can call it
      LocalFunction f;
      f.proto = &fn;
      const std::string overload = overload_of(fn.unknown_fields(), kFunctionOverloadField);
      const std::string domain = canonical_domain(fn.domain());
      f.label = (domain.empty() ? "" : domain + ".") + fn.name() +
                (overload.empty() ? "" : ":" + overload);
      if (!is_valid_utf8(f.label)) {  // it becomes extra.onnx_function, written as JSON
        fail("function '" + escape_invalid_utf8(f.label) +
             "': its domain, name or overload is not valid UTF-8");
      }
      if (!index_.emplace(function_key(domain, fn.name(), overload), functions_.size()).second) {
        fail("function '" + f.label + "' is defined twice");
      }
      functions_.push_back(std::move(f));
    }
  }

  LocalFunction* callee(const ox::NodeProto& node) {
    if (index_.empty()) return nullptr;
    auto it = index_.find(function_key(node.domain(), node.op_type(),
                                       overload_of(node.unknown_fields(), kNodeOverloadField)));
    return it == index_.end() ? nullptr : &functions_[it->second];
  }

  // Every name `g` defines, in its nodes' subgraphs too.
  template <typename Names>
  static void add_graph_names(const ox::GraphProto& g, Names& names) {
    visit_defined_names(g, [&](const std::string& name) { names.insert(names.end(), name); });
    for (const ox::NodeProto& node : g.node()) add_subgraph_names(node, names);
  }
  template <typename Names>
  static void add_subgraph_names(const ox::NodeProto& node, Names& names) {
    visit_subgraphs(node, [&](const ox::GraphProto& sub) { add_graph_names(sub, names); });
  }

  // Reads the body of `f` and its attribute defaults, once.
  void read_body(LocalFunction& f) {
    const ox::FunctionProto& fn = *f.proto;
    for (const std::string& bytes :
         unknown_strings(fn.unknown_fields(), kFunctionAttributeProtoField)) {
      ox::AttributeProto a;
      if (!a.ParseFromString(bytes) || a.name().empty()) {
        fail("function '" + f.label + "': an attribute default does not parse");
      }
      f.defaults[a.name()] = std::move(a);
    }
    std::unordered_set<std::string> inputs;
    for (const std::string& in : fn.input()) {
      if (!inputs.insert(in).second) {
        fail("function '" + f.label + "': input '" + in + "' is listed twice");
      }
    }
    std::unordered_set<std::string> outputs;
    for (const std::string& out : fn.output()) {
      if (!outputs.insert(out).second) {
        fail("function '" + f.label + "': output '" + out + "' is listed twice");
      }
    }
    for (const ox::NodeProto& node : fn.node()) {
      for (const std::string& out : node.output()) {
        if (out.empty()) continue;
        if (inputs.count(out) > 0 || !f.body_names.insert(out).second) {
          fail("function '" + f.label + "': '" + out +
               "' is defined twice (an input, or the output of two nodes)");
        }
      }
    }
    for (const std::string& out : fn.output()) {
      if (f.body_names.count(out) == 0) {
        fail("function '" + f.label + "': output '" + out +
             "' is produced by no node of its body (an input passed through needs an Identity)");
      }
    }
    f.all_names.assign(f.body_names.begin(), f.body_names.end());
    for (const ox::NodeProto& node : fn.node()) add_subgraph_names(node, f.all_names);
  }

  // The Expansion of `node`, `enclosing` calls deep. Reads each function it reaches, once; fails
  // for a function that calls itself and for calls nested deeper than kMaxCallDepth, which bounds
  // the recursion of expand as well as this one's.
  Expansion expansion(const ox::NodeProto& node, int enclosing) {
    Expansion e{1, 0};  // the node, or the call: a call of an empty body is work too
    if (LocalFunction* f = callee(node)) {
      if (f->checked == Checked::kActive) fail("function '" + f->label + "' calls itself");
      if (f->checked == Checked::kNo) {
        if (enclosing >= kMaxCallDepth) fail_depth(*f);
        f->checked = Checked::kActive;
        read_body(*f);
        for (const ox::NodeProto& inner : f->proto->node()) {
          f->body.add(expansion(inner, enclosing + 1));
        }
        f->checked = Checked::kYes;
      }
      if (enclosing + 1 + f->body.depth > kMaxCallDepth) fail_depth(*f);
      e = {1 + f->body.size, 1 + f->body.depth};
    }
    visit_subgraphs(node, [&](const ox::GraphProto& sub) {
      for (const auto& n : sub.node()) e.add(expansion(n, enclosing));
    });
    return e;
  }
  [[noreturn]] void fail_depth(const LocalFunction& f) const {
    fail(fmt::format("function '{}': calls nest deeper than {} levels", f.label, kMaxCallDepth));
  }

  // Replaces the calls among g's nodes, and in their subgraphs, by the functions' bodies.
  // `origins`, when given, receives one entry per node of the result.
  void inline_graph(ox::GraphProto& g, std::vector<NodeOrigin>* origins) {
    pb::RepeatedPtrField<ox::NodeProto> nodes;
    nodes.Swap(g.mutable_node());
    for (int i = 0; i < nodes.size(); ++i) {
      ox::NodeProto& node = *nodes.Mutable(i);
      if (LocalFunction* f = callee(node)) {
        expand(node, *f, *g.mutable_node(), origins);
        continue;
      }
      inline_subgraphs(node);
      g.mutable_node()->Add()->Swap(&node);
      if (origins != nullptr) origins->push_back({i, ""});
    }
  }

  void inline_subgraphs(ox::NodeProto& node) {
    visit_subgraphs(node, [&](ox::GraphProto& sub) { inline_graph(sub, nullptr); });
  }

  // A prefix "<base>/" (or "<base>_<n>/") under which none of the names the call makes exists.
  std::string unique_prefix(const std::string& base, const LocalFunction& f) {
    for (int& n = next_suffix_[base];; ++n) {
      std::string prefix = (n == 0 ? base : base + "_" + std::to_string(n)) + "/";
      const bool free =
          std::none_of(f.all_names.begin(), f.all_names.end(),
                       [&](const std::string& name) { return taken_.count(prefix + name) > 0; });
      if (!free) continue;
      for (const std::string& name : f.all_names) taken_.insert(prefix + name);
      ++n;
      return prefix;
    }
  }

  // The domains the body's nodes use join the model's opset imports at the function's versions;
  // a version that differs from the one already imported is an error.
  void merge_opsets(LocalFunction& f) {
    if (f.opsets_merged) return;
    f.opsets_merged = true;
    std::map<std::string, int64_t> imports;
    for (const auto& o : f.proto->opset_import()) {
      imports[canonical_domain(o.domain())] = o.version();
    }
    std::set<std::string> used;
    for (const ox::NodeProto& node : f.proto->node()) add_domains(node, used);
    for (const std::string& domain : used) {
      auto fi = imports.find(domain);
      auto known = opsets_.find(domain);
      const std::string shown = domain.empty() ? "the default domain" : "domain '" + domain + "'";
      if (fi == imports.end()) {
        if (known != opsets_.end()) continue;  // read at the version already imported
        fail("function '" + f.label + "' uses " + shown + " and imports no opset of it");
      }
      if (known == opsets_.end()) {
        auto* o = model_.add_opset_import();
        o->set_domain(domain);
        o->set_version(fi->second);
        opsets_.emplace(domain, OpsetSource{fi->second, "function '" + f.label + "'"});
      } else if (known->second.version != fi->second) {
        fail(fmt::format(
            "function '{}' imports opset {} of {}, {} opset {}: dplace reads each domain at one "
            "version",
            f.label, fi->second, shown, known->second.source, known->second.version));
      }
    }
  }
  // The domains of the nodes a body runs, in subgraphs too; calls of local functions do not run.
  void add_domains(const ox::NodeProto& node, std::set<std::string>& domains) {
    if (callee(node) == nullptr) domains.insert(canonical_domain(node.domain()));
    visit_subgraphs(node, [&](const ox::GraphProto& sub) {
      for (const auto& n : sub.node()) add_domains(n, domains);
    });
  }

  // What a specialised body reads its names and attributes from.
  struct Binding {
    const LocalFunction* function = nullptr;
    std::string prefix;
    std::unordered_map<std::string, const ox::AttributeProto*> actuals;  // the call's attributes
    std::vector<const Scope*> scopes;  // the body's, then its subgraphs' (innermost last)
  };

  // Appends the body of `f`, specialised for `call`, to `out`. REQUIRES: expansion() read `f`.
  void expand(const ox::NodeProto& call, LocalFunction& f, pb::RepeatedPtrField<ox::NodeProto>& out,
              std::vector<NodeOrigin>* origins) {
    const ox::FunctionProto& fn = *f.proto;
    if (call.input_size() > fn.input_size() || call.output_size() > fn.output_size()) {
      fail(fmt::format("{}: {} inputs and {} outputs for function '{}', which takes {} and {}",
                       node_label(call), call.input_size(), call.output_size(), f.label,
                       fn.input_size(), fn.output_size()));
    }
    merge_opsets(f);
    Binding b;
    b.function = &f;
    b.prefix = unique_prefix(
        call.name().empty() ? fn.name() + "_" + std::to_string(unnamed_++) : call.name(), f);
    Scope scope;
    for (int i = 0; i < fn.input_size(); ++i) {
      scope[fn.input(i)] = i < call.input_size() ? call.input(i) : std::string();
    }
    for (const std::string& name : f.body_names) scope[name] = b.prefix + name;
    for (int i = 0; i < fn.output_size() && i < call.output_size(); ++i) {
      if (!call.output(i).empty()) scope[fn.output(i)] = call.output(i);
    }
    for (const auto& a : call.attribute()) b.actuals[a.name()] = &a;
    b.scopes.push_back(&scope);
    for (int k = 0; k < fn.node_size(); ++k) {
      ox::NodeProto node = fn.node(k);
      const std::string& inner = node.name();
      node.set_name(b.prefix + (inner.empty() ? node.op_type() + "_" + std::to_string(k) : inner));
      for (std::string& in : *node.mutable_input()) rename_read(in, b, node_label(node));
      for (std::string& o : *node.mutable_output()) {
        if (!o.empty()) o = scope.at(o);
      }
      bind_attributes(node, b);
      if (LocalFunction* nested = callee(node)) {
        expand(node, *nested, out, origins);
        continue;
      }
      inline_subgraphs(node);
      out.Add(std::move(node));
      if (origins != nullptr) origins->push_back({-1, f.label});
    }
  }

  // Renames a name read in a body through the binding's scopes, innermost first. `reader` says
  // who reads it, for the error.
  void rename_read(std::string& name, const Binding& b, const std::string& reader) const {
    if (name.empty()) return;
    for (auto s = b.scopes.rbegin(); s != b.scopes.rend(); ++s) {
      if (auto it = (*s)->find(name); it != (*s)->end()) {
        name = it->second;
        return;
      }
    }
    fail("function '" + b.function->label + "': " + reader + " reads '" + name +
         "', which is neither an input of the function nor defined in its body");
  }

  // Resolves references to the function's attributes, and specialises the subgraphs of `node`.
  // A graph the call passes as an attribute's value reads the caller's names, and stays as it is.
  void bind_attributes(ox::NodeProto& node, Binding& b) {
    auto& attributes = *node.mutable_attribute();
    for (int i = 0; i < attributes.size();) {
      ox::AttributeProto& a = *attributes.Mutable(i);
      bool from_call = false;
      if (!a.ref_attr_name().empty()) {
        const ox::AttributeProto* value = nullptr;
        if (auto it = b.actuals.find(a.ref_attr_name()); it != b.actuals.end()) {
          value = it->second;
          from_call = true;
        } else if (auto d = b.function->defaults.find(a.ref_attr_name());
                   d != b.function->defaults.end()) {
          value = &d->second;
        }
        if (value == nullptr) {
          attributes.DeleteSubrange(i, 1);
          continue;
        }
        const std::string name = a.name();
        a = *value;
        a.set_name(name);
        charge_copied_graphs(a);
      }
      if (!from_call) visit_attribute_graphs(a, [&](ox::GraphProto& sub) { rename_graph(sub, b); });
      ++i;
    }
  }

  // Counts the nodes of the graphs an attribute value copied from the call or a default holds:
  // expansion() counts each such graph once, a body may refer to it from many nodes.
  void charge_copied_graphs(const ox::AttributeProto& a) {
    visit_attribute_graphs(a,
                           [&](const ox::GraphProto& sub) { copied_nodes_ += count_nodes(sub); });
    if (copied_nodes_ > kMaxInlinedNodes) {
      fail(
          fmt::format("inlining the model's functions copies more than {} nodes of graphs that "
                      "calls pass as attribute values",
                      kMaxInlinedNodes));
    }
  }
  static double count_nodes(const ox::GraphProto& g) {
    double nodes = g.node_size();
    for (const ox::NodeProto& node : g.node()) {
      visit_subgraphs(node, [&](const ox::GraphProto& sub) { nodes += count_nodes(sub); });
    }
    return nodes;
  }

  // Specialises a subgraph of a body node: the names it defines take the call's prefix, the names
  // it reads from the body are renamed as the body's are.
  void rename_graph(ox::GraphProto& g, Binding& b) {
    Scope local;
    visit_defined_names(g, [&](const std::string& name) { local[name] = b.prefix + name; });
    b.scopes.push_back(&local);
    const std::string graph = "subgraph '" + g.name() + "'";
    for (auto& in : *g.mutable_input()) rename_read(*in.mutable_name(), b, graph);
    for (auto& t : *g.mutable_initializer()) rename_read(*t.mutable_name(), b, graph);
    for (auto& s : *g.mutable_sparse_initializer()) {
      rename_read(*s.mutable_values()->mutable_name(), b, graph);
    }
    for (auto& node : *g.mutable_node()) {
      const std::string reader = node_label(node) + " of " + graph;
      if (!node.name().empty()) node.set_name(b.prefix + node.name());
      for (std::string& in : *node.mutable_input()) rename_read(in, b, reader);
      for (std::string& o : *node.mutable_output()) rename_read(o, b, reader);
      bind_attributes(node, b);
    }
    for (auto& out : *g.mutable_output()) {
      rename_read(*out.mutable_name(), b, "the output of " + graph);
    }
    for (auto& info : *g.mutable_value_info()) {
      for (auto s = b.scopes.rbegin(); s != b.scopes.rend(); ++s) {
        if (auto it = (*s)->find(info.name()); it != (*s)->end()) {
          info.set_name(it->second);
          break;
        }
      }
    }
    b.scopes.pop_back();
  }

  ox::ModelProto& model_;
  std::string path_;
  std::vector<LocalFunction> functions_;
  std::unordered_map<std::string, size_t> index_;     // function_key -> functions_
  std::map<std::string, OpsetSource> opsets_;         // domain -> the version read
  std::unordered_set<std::string> taken_;             // every name of the model, and those made
  std::unordered_map<std::string, int> next_suffix_;  // unique_prefix's next try per base
  int unnamed_ = 0;                                   // unnamed calls so far
  double copied_nodes_ = 0;                           // charge_copied_graphs' count
};

}  // namespace

std::vector<NodeOrigin> inline_local_functions(ox::ModelProto& model, const std::string& path) {
  if (model.functions_size() == 0) {
    std::vector<NodeOrigin> origins;
    for (int i = 0; i < model.graph().node_size(); ++i) origins.push_back({i, ""});
    return origins;
  }
  return Inliner(model, path).run();
}

}  // namespace dplace::onnx_detail
