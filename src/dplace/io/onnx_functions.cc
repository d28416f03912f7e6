#include "dplace/io/onnx_functions.h"

#include <fmt/format.h>
#include <google/protobuf/unknown_field_set.h>

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

namespace dplace::onnx_detail {
namespace {

namespace ox = ::ONNX_NAMESPACE;
namespace pb = ::google::protobuf;

// More nodes than any real model has; a model whose functions call each other several times per
// level would otherwise expand exponentially.
constexpr int64_t kMaxInlinedNodes = 2'000'000;

// Fields newer than this libonnx's proto, read from the unknown fields.
constexpr int kNodeOverloadField = 8;             // NodeProto.overload (IR 10)
constexpr int kFunctionAttributeProtoField = 11;  // FunctionProto.attribute_proto (IR 9)
constexpr int kFunctionOverloadField = 13;        // FunctionProto.overload (IR 10)

std::string normal_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

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
  std::string key = normal_domain(domain);
  key += '\0';
  key += name;
  key += '\0';
  key += overload;
  return key;
}

enum class SizeState { kUnknown, kActive, kKnown };

// A model-local function, indexed.
struct LocalFunction {
  const ox::FunctionProto* proto = nullptr;
  std::string label;  // NodeOrigin::function
  std::unordered_map<std::string, ox::AttributeProto> defaults;
  // Every name its body defines, subgraphs included, and its outputs: what a call prefixes.
  std::vector<std::string> local_names;
  bool opsets_checked = false;
  SizeState size_state = SizeState::kUnknown;  // of `size`, the nodes a call of it makes
  double size = 0;
};

using Scope = std::unordered_map<std::string, std::string>;

class Inliner {
 public:
  Inliner(ox::ModelProto& model, std::string path) : model_(model), path_(std::move(path)) {}

  InlinedFunctions run() {
    index_functions();
    for (const auto& o : model_.opset_import()) {
      model_opsets_.emplace(normal_domain(o.domain()), o.version());
    }
    collect_names(model_.graph());
    double nodes = 0;
    for (const ox::NodeProto& node : model_.graph().node()) nodes += expanded_size(node);
    if (nodes > kMaxInlinedNodes) {
      fail(fmt::format("inlining the model's functions would make {:.3g} nodes, more than {}",
                       nodes, kMaxInlinedNodes));
    }
    ox::GraphProto& g = *model_.mutable_graph();
    std::vector<NodeOrigin> origins;
    inline_graph(g, &origins);
    model_.clear_functions();
    InlinedFunctions result;
    result.calls = calls_;
    if (calls_ > 0) result.origins = std::move(origins);
    return result;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw FormatError(path_ + ": " + one_line(message));
  }

  void index_functions() {
    functions_.reserve(static_cast<size_t>(model_.functions_size()));
    for (int i = 0; i < model_.functions_size(); ++i) {
      const ox::FunctionProto& fn = model_.functions(i);
      if (fn.name().empty()) fail("function #" + std::to_string(i) + " has no name");
      LocalFunction f;
      f.proto = &fn;
      const std::string overload = overload_of(fn.unknown_fields(), kFunctionOverloadField);
      f.label = (normal_domain(fn.domain()).empty() ? "" : fn.domain() + ".") + fn.name() +
                (overload.empty() ? "" : ":" + overload);
      for (const std::string& bytes :
           unknown_strings(fn.unknown_fields(), kFunctionAttributeProtoField)) {
        ox::AttributeProto a;
        if (!a.ParseFromString(bytes) || a.name().empty()) {
          fail("function '" + f.label + "': an attribute default does not parse");
        }
        f.defaults[a.name()] = std::move(a);
      }
      check_body(f);
      const std::string key = function_key(fn.domain(), fn.name(), overload);
      if (!index_.emplace(key, functions_.size()).second) {
        fail("function '" + f.label + "' is defined twice");
      }
      functions_.push_back(std::move(f));
    }
  }

  // Checks the body's names and lists what a call prefixes.
  void check_body(LocalFunction& f) {
    const ox::FunctionProto& fn = *f.proto;
    std::unordered_set<std::string> inputs(fn.input().begin(), fn.input().end());
    std::unordered_set<std::string> produced;
    for (const ox::NodeProto& node : fn.node()) {
      for (const std::string& out : node.output()) {
        if (out.empty()) continue;
        if (inputs.count(out) > 0 || !produced.insert(out).second) {
          fail("function '" + f.label + "': '" + out +
               "' is defined twice (an input, or the output of two nodes)");
        }
      }
    }
    for (const std::string& out : fn.output()) {
      if (produced.count(out) == 0) {
        fail("function '" + f.label + "': output '" + out + "' is produced by no node of its body");
      }
    }
    f.local_names.assign(produced.begin(), produced.end());
    for (const ox::NodeProto& node : fn.node()) add_subgraph_names(node, f.local_names);
  }

  static void add_subgraph_names(const ox::NodeProto& node, std::vector<std::string>& names) {
    for (const auto& a : node.attribute()) {
      if (a.has_g()) add_graph_names(a.g(), names);
      for (const auto& sub : a.graphs()) add_graph_names(sub, names);
    }
  }
  static void add_graph_names(const ox::GraphProto& g, std::vector<std::string>& names) {
    for (const auto& in : g.input()) names.push_back(in.name());
    for (const auto& t : g.initializer()) names.push_back(t.name());
    for (const auto& s : g.sparse_initializer()) names.push_back(s.values().name());
    for (const ox::NodeProto& node : g.node()) {
      for (const std::string& out : node.output()) {
        if (!out.empty()) names.push_back(out);
      }
      add_subgraph_names(node, names);
    }
  }

  // Every name the model defines, so that the names calls make do not collide with them.
  void collect_names(const ox::GraphProto& g) {
    std::vector<std::string> names;
    add_graph_names(g, names);
    taken_.insert(names.begin(), names.end());
  }

  LocalFunction* callee(const ox::NodeProto& node) {
    if (index_.empty()) return nullptr;
    auto it = index_.find(function_key(node.domain(), node.op_type(),
                                       overload_of(node.unknown_fields(), kNodeOverloadField)));
    return it == index_.end() ? nullptr : &functions_[it->second];
  }

  // The nodes `node` stands for once every call in it is inlined, its subgraphs' nodes included
  // (as a double: a deep chain of calls overflows any integer). Fails for a function that calls
  // itself.
  double expanded_size(const ox::NodeProto& node) {
    double size = 0;
    if (LocalFunction* f = callee(node)) {
      if (f->size_state == SizeState::kActive) fail("function '" + f->label + "' calls itself");
      if (f->size_state == SizeState::kUnknown) {
        f->size_state = SizeState::kActive;
        for (const ox::NodeProto& inner : f->proto->node()) f->size += expanded_size(inner);
        f->size_state = SizeState::kKnown;
      }
      size = f->size;
    } else {
      size = 1;
    }
    for (const auto& a : node.attribute()) {
      if (a.has_g()) {
        for (const auto& n : a.g().node()) size += expanded_size(n);
      }
      for (const auto& sub : a.graphs()) {
        for (const auto& n : sub.node()) size += expanded_size(n);
      }
    }
    return size;
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
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) inline_graph(*a.mutable_g(), nullptr);
      for (auto& sub : *a.mutable_graphs()) inline_graph(sub, nullptr);
    }
  }

  std::string call_label(const ox::NodeProto& call) const {
    return "node '" + call.name() + "' (" + call.op_type() + ")";
  }

  // A prefix "<base>/" (or "<base>_<n>/") under which none of the names the call makes exists.
  std::string unique_prefix(const std::string& base, const LocalFunction& f) {
    for (int n = 0;; ++n) {
      std::string prefix = (n == 0 ? base : base + "_" + std::to_string(n)) + "/";
      bool free = true;
      for (const std::string& name : f.local_names) {
        if (taken_.count(prefix + name) > 0) {
          free = false;
          break;
        }
      }
      if (!free) continue;
      for (const std::string& name : f.local_names) taken_.insert(prefix + name);
      return prefix;
    }
  }

  // The domains the function's body uses join the model's opset imports at the function's
  // versions; a version that differs from the model's is an error.
  void merge_opsets(LocalFunction& f) {
    if (f.opsets_checked) return;
    f.opsets_checked = true;
    std::map<std::string, int64_t> imports;
    for (const auto& o : f.proto->opset_import()) imports[normal_domain(o.domain())] = o.version();
    std::set<std::string> used;
    for (const ox::NodeProto& node : f.proto->node()) add_domains(node, used);
    for (const std::string& domain : used) {
      auto fi = imports.find(domain);
      auto mi = model_opsets_.find(domain);
      const std::string shown = domain.empty() ? "the default domain" : "domain '" + domain + "'";
      if (fi == imports.end()) {
        if (mi != model_opsets_.end()) continue;  // read at the model's version
        fail("function '" + f.label + "' uses " + shown + " and imports no opset of it");
      }
      if (mi == model_opsets_.end()) {
        auto* o = model_.add_opset_import();
        o->set_domain(domain);
        o->set_version(fi->second);
        model_opsets_.emplace(domain, fi->second);
      } else if (mi->second != fi->second) {
        fail(fmt::format(
            "function '{}' imports opset {} of {}, the model opset {}: dplace reads each domain "
            "at one version (onnx.version_converter can bring the model to one)",
            f.label, fi->second, shown, mi->second));
      }
    }
  }
  // The domains of the nodes a body runs, in subgraphs too; calls of local functions are not
  // nodes that run.
  void add_domains(const ox::NodeProto& node, std::set<std::string>& domains) {
    if (callee(node) == nullptr) domains.insert(normal_domain(node.domain()));
    for (const auto& a : node.attribute()) {
      if (a.has_g()) {
        for (const auto& n : a.g().node()) add_domains(n, domains);
      }
      for (const auto& sub : a.graphs()) {
        for (const auto& n : sub.node()) add_domains(n, domains);
      }
    }
  }

  // Appends the body of `f`, specialised for `call`, to `out`.
  void expand(const ox::NodeProto& call, LocalFunction& f, pb::RepeatedPtrField<ox::NodeProto>& out,
              std::vector<NodeOrigin>* origins) {
    const ox::FunctionProto& fn = *f.proto;
    if (call.input_size() > fn.input_size() || call.output_size() > fn.output_size()) {
      fail(fmt::format("{}: {} inputs and {} outputs for function '{}', which takes {} and {}",
                       call_label(call), call.input_size(), call.output_size(), f.label,
                       fn.input_size(), fn.output_size()));
    }
    merge_opsets(f);
    ++calls_;
    const std::string base =
        call.name().empty() ? fn.name() + "_" + std::to_string(unnamed_calls_++) : call.name();
    const std::string prefix = unique_prefix(base, f);

    Scope scope;
    for (int i = 0; i < fn.input_size(); ++i) {
      scope[fn.input(i)] = i < call.input_size() ? call.input(i) : std::string();
    }
    for (const std::string& name : f.local_names) scope.emplace(name, prefix + name);
    for (int i = 0; i < fn.output_size(); ++i) {
      if (i < call.output_size() && !call.output(i).empty()) scope[fn.output(i)] = call.output(i);
    }
    std::unordered_map<std::string, const ox::AttributeProto*> actuals;
    for (const auto& a : call.attribute()) actuals[a.name()] = &a;

    std::vector<const Scope*> scopes{&scope};
    for (int k = 0; k < fn.node_size(); ++k) {
      ox::NodeProto node = fn.node(k);
      const std::string& inner = node.name();
      node.set_name(prefix + (inner.empty() ? node.op_type() + "_" + std::to_string(k) : inner));
      for (std::string& in : *node.mutable_input()) rename_read(in, scopes, f, node.name());
      for (std::string& out : *node.mutable_output()) {
        if (!out.empty()) out = scope.at(out);
      }
      bind_attributes(node, f, actuals, scopes, prefix);
      if (LocalFunction* nested = callee(node)) {
        expand(node, *nested, out, origins);
        continue;
      }
      inline_subgraphs(node);
      out.Add(std::move(node));
      if (origins != nullptr) origins->push_back({-1, f.label});
    }
  }

  // Renames a name a body node reads through the scopes, innermost first.
  // `reader` names the node (or subgraph output) that reads it, for the error.
  void rename_read(std::string& name, const std::vector<const Scope*>& scopes,
                   const LocalFunction& f, const std::string& reader) const {
    if (name.empty()) return;
    for (auto s = scopes.rbegin(); s != scopes.rend(); ++s) {
      if (auto it = (*s)->find(name); it != (*s)->end()) {
        name = it->second;
        return;
      }
    }
    fail("function '" + f.label + "': '" + reader + "' reads '" + name +
         "', which is neither an input of the function nor defined in its body");
  }

  // Resolves references to the function's attributes, and renames the subgraphs of `node`.
  void bind_attributes(ox::NodeProto& node, const LocalFunction& f,
                       const std::unordered_map<std::string, const ox::AttributeProto*>& actuals,
                       std::vector<const Scope*>& scopes, const std::string& prefix) {
    auto& attributes = *node.mutable_attribute();
    for (int i = 0; i < attributes.size();) {
      ox::AttributeProto& a = *attributes.Mutable(i);
      if (!a.ref_attr_name().empty()) {
        const ox::AttributeProto* value = nullptr;
        if (auto it = actuals.find(a.ref_attr_name()); it != actuals.end()) {
          value = it->second;
        } else if (auto d = f.defaults.find(a.ref_attr_name()); d != f.defaults.end()) {
          value = &d->second;
        }
        if (value == nullptr) {
          attributes.DeleteSubrange(i, 1);
          continue;
        }
        const std::string name = a.name();
        a = *value;
        a.set_name(name);
      }
      if (a.has_g()) rename_graph(*a.mutable_g(), f, actuals, scopes, prefix);
      for (auto& sub : *a.mutable_graphs()) rename_graph(sub, f, actuals, scopes, prefix);
      ++i;
    }
  }

  // Specialises a subgraph of a body node: the names it defines take the call's prefix, the names
  // it reads from the body are renamed as the body's are.
  void rename_graph(ox::GraphProto& g, const LocalFunction& f,
                    const std::unordered_map<std::string, const ox::AttributeProto*>& actuals,
                    std::vector<const Scope*>& scopes, const std::string& prefix) {
    Scope local;
    auto define = [&](std::string& name) {
      if (name.empty()) return;
      std::string renamed = prefix + name;
      local[name] = renamed;
      name = std::move(renamed);
    };
    for (auto& in : *g.mutable_input()) define(*in.mutable_name());
    for (auto& t : *g.mutable_initializer()) define(*t.mutable_name());
    for (auto& s : *g.mutable_sparse_initializer()) define(*s.mutable_values()->mutable_name());
    for (auto& node : *g.mutable_node()) {
      for (std::string& out : *node.mutable_output()) define(out);
    }
    scopes.push_back(&local);
    for (auto& node : *g.mutable_node()) {
      if (!node.name().empty()) node.set_name(prefix + node.name());
      for (std::string& in : *node.mutable_input()) rename_read(in, scopes, f, node.name());
      bind_attributes(node, f, actuals, scopes, prefix);
    }
    for (auto& out : *g.mutable_output()) {
      rename_read(*out.mutable_name(), scopes, f, "output of subgraph '" + g.name() + "'");
    }
    for (auto& info : *g.mutable_value_info()) {
      for (auto s = scopes.rbegin(); s != scopes.rend(); ++s) {
        if (auto it = (*s)->find(info.name()); it != (*s)->end()) {
          info.set_name(it->second);
          break;
        }
      }
    }
    scopes.pop_back();
  }

  ox::ModelProto& model_;
  std::string path_;
  std::vector<LocalFunction> functions_;
  std::unordered_map<std::string, size_t> index_;  // function_key -> functions_
  std::map<std::string, int64_t> model_opsets_;
  std::unordered_set<std::string> taken_;
  int calls_ = 0;
  int unnamed_calls_ = 0;
};

}  // namespace

InlinedFunctions inline_local_functions(ox::ModelProto& model, const std::string& path) {
  if (model.functions_size() == 0) return {};
  return Inliner(model, path).run();
}

}  // namespace dplace::onnx_detail
