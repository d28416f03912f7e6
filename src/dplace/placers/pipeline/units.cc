#include "dplace/placers/pipeline/units.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <unordered_map>

#include "dplace/core/error.h"

namespace dplace {

namespace {

void sort_unique(std::vector<uint32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// Tarjan's strongly connected components, iterative. Returns the component of each vertex.
std::vector<uint32_t> strongly_connected_components(
    const std::vector<std::vector<uint32_t>>& succ) {
  const size_t n = succ.size();
  constexpr uint32_t kUnvisited = UINT32_MAX;
  std::vector<uint32_t> index(n, kUnvisited), low(n, 0), comp(n, kUnvisited);
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<uint32_t> stack;
  struct Frame {
    uint32_t v;
    size_t next;
  };
  std::vector<Frame> frames;
  uint32_t counter = 0;
  uint32_t num_comps = 0;
  for (uint32_t root = 0; root < n; ++root) {
    if (index[root] != kUnvisited) continue;
    frames.push_back({root, 0});
    index[root] = low[root] = counter++;
    stack.push_back(root);
    on_stack[root] = 1;
    while (!frames.empty()) {
      Frame& f = frames.back();
      if (f.next < succ[f.v].size()) {
        const uint32_t w = succ[f.v][f.next++];
        if (index[w] == kUnvisited) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = 1;
          frames.push_back({w, 0});
        } else if (on_stack[w]) {
          low[f.v] = std::min(low[f.v], index[w]);
        }
        continue;
      }
      const uint32_t v = f.v;
      frames.pop_back();
      if (!frames.empty()) low[frames.back().v] = std::min(low[frames.back().v], low[v]);
      if (low[v] == index[v]) {
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = num_comps;
        } while (w != v);
        ++num_comps;
      }
    }
  }
  return comp;
}

}  // namespace

ColourClasses colour_classes(const PipelineProblem& problem) {
  ColourClasses out;
  out.class_of_node.resize(problem.nodes.size());
  std::unordered_map<int64_t, uint32_t> class_of_colour;
  for (size_t i = 0; i < problem.nodes.size(); ++i) {
    const int64_t colour = problem.nodes[i].colour;
    if (colour < 0) {
      out.class_of_node[i] = static_cast<uint32_t>(out.num_classes++);
      continue;
    }
    auto [it, inserted] = class_of_colour.emplace(colour, static_cast<uint32_t>(out.num_classes));
    if (inserted) ++out.num_classes;
    out.class_of_node[i] = it->second;
  }
  return out;
}

UnitDag build_unit_dag(const PipelineProblem& problem) {
  const size_t n = problem.nodes.size();
  const size_t num_types = problem.types.size();
  const ColourClasses classes = colour_classes(problem);
  const size_t c = classes.num_classes;
  const auto& cls = classes.class_of_node;

  std::vector<uint8_t> has_forward(c, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!problem.nodes[i].backward) has_forward[cls[i]] = 1;
  }

  // Class graph: forward edges, plus mirrored backward edges that touch an orphan class.
  std::vector<std::vector<uint32_t>> class_succ(c);
  for (const PipelineTensor& t : problem.tensors) {
    const uint32_t p = t.producer;
    for (uint32_t q : t.consumers) {
      const uint32_t a = cls[p];
      const uint32_t b = cls[q];
      if (a == b) continue;
      const bool p_bwd = problem.nodes[p].backward;
      const bool q_bwd = problem.nodes[q].backward;
      if (!p_bwd && !q_bwd) {
        class_succ[a].push_back(b);
      } else if (p_bwd && q_bwd && (!has_forward[a] || !has_forward[b])) {
        class_succ[b].push_back(a);
      }
    }
  }
  for (auto& s : class_succ) sort_unique(s);
  const std::vector<uint32_t> comp = strongly_connected_components(class_succ);

  UnitDag dag;
  dag.num_types = num_types;
  dag.unit_of_node.resize(n);
  std::vector<uint32_t> unit_of_comp(c, UINT32_MAX);
  for (size_t i = 0; i < n; ++i) {
    uint32_t& u = unit_of_comp[comp[cls[i]]];
    if (u == UINT32_MAX) u = static_cast<uint32_t>(dag.num_units++);
    dag.unit_of_node[i] = u;
  }
  const size_t m = dag.num_units;
  dag.nodes_of_unit.resize(m);
  dag.time_s.assign(m, std::vector<double>(num_types, 0.0));
  dag.size_bytes.assign(m, 0.0);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = dag.unit_of_node[i];
    dag.nodes_of_unit[u].push_back(static_cast<uint32_t>(i));
    for (size_t t = 0; t < num_types; ++t) dag.time_s[u][t] += problem.nodes[i].time_s[t];
    dag.size_bytes[u] += problem.nodes[i].size_bytes;
  }

  dag.succ.resize(m);
  dag.pred.resize(m);
  for (size_t a = 0; a < c; ++a) {
    for (uint32_t b : class_succ[a]) {
      const uint32_t ua = unit_of_comp[comp[a]];
      const uint32_t ub = unit_of_comp[comp[b]];
      if (ua != ub) dag.succ[ua].push_back(ub);
    }
  }
  for (size_t u = 0; u < m; ++u) {
    sort_unique(dag.succ[u]);
    for (uint32_t v : dag.succ[u]) dag.pred[v].push_back(static_cast<uint32_t>(u));
  }

  // Kahn's order with ties by unit index.
  std::vector<uint32_t> indegree(m);
  for (size_t u = 0; u < m; ++u) indegree[u] = static_cast<uint32_t>(dag.pred[u].size());
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
  for (uint32_t u = 0; u < m; ++u) {
    if (indegree[u] == 0) ready.push(u);
  }
  while (!ready.empty()) {
    const uint32_t u = ready.top();
    ready.pop();
    dag.topo_order.push_back(u);
    for (uint32_t v : dag.succ[u]) {
      if (--indegree[v] == 0) ready.push(v);
    }
  }
  DPLACE_CHECK(dag.topo_order.size() == m) << "unit graph is not acyclic after SCC fusion";

  dag.tensors_of_unit.resize(m);
  std::vector<uint32_t> touched;
  for (const PipelineTensor& t : problem.tensors) {
    touched.clear();
    touched.push_back(dag.unit_of_node[t.producer]);
    for (uint32_t q : t.consumers) touched.push_back(dag.unit_of_node[q]);
    sort_unique(touched);
    if (touched.size() < 2) continue;
    UnitTensor ut;
    ut.producer_unit = dag.unit_of_node[t.producer];
    ut.units = touched;
    ut.comm_s.assign(num_types, 0.0);
    for (size_t k = 0; k < num_types; ++k) {
      if (problem.types[k].pays_communication) ut.comm_s[k] = t.comm_s[k];
    }
    const auto index = static_cast<uint32_t>(dag.tensors.size());
    for (uint32_t u : ut.units) dag.tensors_of_unit[u].push_back(index);
    dag.tensors.push_back(std::move(ut));
  }
  return dag;
}

std::vector<uint32_t> depth_first_topological_order(const UnitDag& dag) {
  const size_t m = dag.num_units;
  std::vector<uint32_t> missing(m);
  for (size_t u = 0; u < m; ++u) missing[u] = static_cast<uint32_t>(dag.pred[u].size());
  std::vector<uint32_t> stack;
  for (size_t u = m; u-- > 0;) {
    if (missing[u] == 0) stack.push_back(static_cast<uint32_t>(u));
  }
  std::vector<uint32_t> order;
  order.reserve(m);
  while (!stack.empty()) {
    const uint32_t u = stack.back();
    stack.pop_back();
    order.push_back(u);
    for (size_t k = dag.succ[u].size(); k-- > 0;) {
      const uint32_t v = dag.succ[u][k];
      if (--missing[v] == 0) stack.push_back(v);
    }
  }
  DPLACE_CHECK(order.size() == m) << "unit DAG has a cycle";
  return order;
}

std::vector<int> device_of_nodes(const UnitDag& dag, const std::vector<int>& device_of_unit) {
  std::vector<int> out(dag.unit_of_node.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = device_of_unit[dag.unit_of_node[i]];
  return out;
}

}  // namespace dplace
