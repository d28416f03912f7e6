#include "dplace/placers/learning/features.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>

#include "dplace/core/error.h"

namespace dplace {
namespace {

// The relative-time feature of a device the node may not use, log(t_d / t_min) = 10: as if it
// were e^10 (about 22,000) times slower than the fastest; slower allowed devices are capped there.
constexpr double kNotAllowedLogRatio = 10;

// Sine and cosine of the topological position at this many frequencies.
constexpr int kPositionFrequencies = 6;

float log_ratio(double value, double max_value) {
  if (max_value <= 0 || value <= 0) return 0.0f;
  return static_cast<float>(std::log1p(value) / std::log1p(max_value));
}

}  // namespace

GroupFeatures make_group_features(const Graph& graph, const CostTable& costs,
                                  const Coarsening& coarsening, const FeatureOptions& options) {
  DPLACE_CHECK(coarsening.group_of_op.size() == graph.num_ops());
  const int G = static_cast<int>(coarsening.num_groups);
  const int D = static_cast<int>(costs.num_devices());
  const int V = options.type_vocabulary;
  const int S = options.output_slots;
  const int A = options.adjacency_slots;

  GroupFeatures f;
  f.num_groups = G;
  f.num_devices = D;
  f.feature_dim = (V + 1) + S + 2 * A + 3;

  // The type vocabulary: most frequent types first, ties by name.
  std::map<std::string, int64_t> type_count;
  for (const Op& op : graph.ops()) ++type_count[op.type];
  std::vector<std::pair<std::string, int64_t>> types(type_count.begin(), type_count.end());
  std::stable_sort(types.begin(), types.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::map<std::string, int> slot_of_type;
  for (int i = 0; i < static_cast<int>(types.size()) && i < V; ++i) {
    slot_of_type[types[i].first] = i;
    f.vocabulary.push_back(types[i].first);
  }

  std::vector<std::vector<int64_t>> counts(G, std::vector<int64_t>(V + 1, 0));
  std::vector<double> compute(G, 0.0);
  std::vector<double> params(G, 0.0);
  std::vector<std::vector<int64_t>> sent(G);  // bytes of tensors leaving the group
  // Bytes exchanged with each neighbour group, per direction.
  std::vector<std::map<uint32_t, int64_t>> in_bytes(G);
  std::vector<std::map<uint32_t, int64_t>> out_bytes(G);
  int64_t max_tensor = 0;
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    const OpId op = OpId::from_index(i);
    const Op& o = graph.op(op);
    const uint32_t g = coarsening.group_of_op[i].value();
    const auto it = slot_of_type.find(o.type);
    ++counts[g][it == slot_of_type.end() ? V : it->second];
    compute[g] += costs.fastest_time_s(op);
    params[g] += static_cast<double>(o.param_bytes);
    for (uint32_t k = 0; k < graph.num_outputs(op); ++k) {
      const TensorRef t{op, k};
      const int64_t bytes = graph.tensor_bytes(t);
      max_tensor = std::max(max_tensor, bytes);
      bool leaves = false;
      for (OpId consumer : graph.consumers(t)) {
        const uint32_t h = coarsening.group_of_op[consumer.value()].value();
        if (h == g) continue;
        leaves = true;
        out_bytes[g][h] += bytes;
        in_bytes[h][g] += bytes;
      }
      if (leaves) sent[g].push_back(bytes);
    }
  }
  int64_t max_count = 1;
  for (const auto& row : counts) {
    for (int64_t c : row) max_count = std::max(max_count, c);
  }
  const double max_compute = *std::max_element(compute.begin(), compute.end());
  const double max_params = *std::max_element(params.begin(), params.end());

  // Neighbours sorted by bytes exchanged (descending), then id.
  auto top_neighbours = [](const std::map<uint32_t, int64_t>& m, int n) {
    std::vector<std::pair<uint32_t, int64_t>> v(m.begin(), m.end());
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (static_cast<int>(v.size()) > n) v.resize(n);
    return v;
  };

  f.values.assign(static_cast<size_t>(G) * f.feature_dim, 0.0f);
  for (int g = 0; g < G; ++g) {
    float* row = f.values.data() + static_cast<size_t>(g) * f.feature_dim;
    int col = 0;
    for (int v = 0; v <= V; ++v) {
      row[col++] = log_ratio(static_cast<double>(counts[g][v]), static_cast<double>(max_count));
    }
    std::vector<int64_t>& s = sent[g];
    std::sort(s.begin(), s.end(), std::greater<>());
    for (int k = 0; k < S; ++k) {
      row[col++] = k < static_cast<int>(s.size())
                       ? log_ratio(static_cast<double>(s[k]), static_cast<double>(max_tensor))
                       : 0.0f;
    }
    for (const auto* m : {&in_bytes[g], &out_bytes[g]}) {
      const auto top = top_neighbours(*m, A);
      for (int k = 0; k < A; ++k) {
        row[col++] = k < static_cast<int>(top.size())
                         ? static_cast<float>(top[k].first + 1) / static_cast<float>(G)
                         : 0.0f;
      }
    }
    // log1p of tiny second counts is ~linear; scale compute to microseconds first.
    row[col++] = log_ratio(compute[g] * 1e6, max_compute * 1e6);
    row[col++] = log_ratio(params[g], max_params);
    row[col++] = static_cast<float>(g) / static_cast<float>(G);
    DPLACE_CHECK(col == f.feature_dim);
  }

  // Allowed devices: the intersection over the group's colocation groups.
  f.allowed.assign(static_cast<size_t>(G) * D, 1);
  for (size_t i = 0; i < graph.num_ops(); ++i) {
    const uint32_t g = coarsening.group_of_op[i].value();
    for (int d = 0; d < D; ++d) {
      if (!costs.allowed(OpId::from_index(i), DeviceId::from_index(d))) {
        f.allowed[static_cast<size_t>(g) * D + d] = 0;
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    bool any = false;
    for (int d = 0; d < D; ++d) any = any || f.allowed[static_cast<size_t>(g) * D + d];
    DPLACE_CHECK(any) << "coarse group " << g << " has no device all of its ops allow";
  }
  return f;
}

NodeFeatures make_node_features(const Graph& graph, const CostTable& costs,
                                const Coarsening& coarsening) {
  const GroupFeatures base = make_group_features(graph, costs, coarsening);
  const size_t N = coarsening.num_groups;
  const size_t D = costs.num_devices();
  const size_t B = static_cast<size_t>(base.feature_dim);
  const size_t F = B + D + 2 * kPositionFrequencies;
  NodeFeatures g;
  g.feature_dim = static_cast<int>(F);
  g.values.assign(N * F, 0.0);
  g.allowed = base.allowed;
  g.vocabulary = base.vocabulary;
  std::vector<double>& time_s = g.time_s;
  time_s.assign(N * D, 0.0);
  for (size_t op = 0; op < graph.num_ops(); ++op) {
    const size_t node = coarsening.group_of_op[op].value();
    for (size_t d = 0; d < D; ++d) {
      time_s[node * D + d] += costs.time_s(OpId::from_index(op), DeviceId::from_index(d));
    }
  }
  for (size_t u = 0; u < N; ++u) {
    double fastest = INFINITY;
    for (size_t d = 0; d < D; ++d)
      if (g.allowed[u * D + d]) fastest = std::min(fastest, time_s[u * D + d]);
    double* row = g.values.data() + u * F;
    for (size_t j = 0; j < B; ++j) row[j] = base.values[u * B + j];
    for (size_t d = 0; d < D; ++d) {
      double value = kNotAllowedLogRatio;
      if (g.allowed[u * D + d]) {
        value = fastest > 0 ? std::min(kNotAllowedLogRatio, std::log(time_s[u * D + d] / fastest))
                            : 0.0;
      }
      row[B + d] = value;
    }
    const double position = static_cast<double>(u) / static_cast<double>(N);
    for (int j = 0; j < kPositionFrequencies; ++j) {
      const double angle = std::ldexp(std::numbers::pi * position, j);
      row[B + D + 2 * j] = std::sin(angle);
      row[B + D + 2 * j + 1] = std::cos(angle);
    }
  }
  for (size_t j = 0; j < F; ++j) {
    double mean = 0, var = 0;
    for (size_t u = 0; u < N; ++u) mean += g.values[u * F + j] / static_cast<double>(N);
    for (size_t u = 0; u < N; ++u) {
      const double x = g.values[u * F + j] - mean;
      var += x * x / static_cast<double>(N);
    }
    const double sd = std::sqrt(var);
    for (size_t u = 0; u < N; ++u) {
      double& x = g.values[u * F + j];
      // A column equal on every node (up to rounding) says nothing: 0.
      x = sd > 1e-12 ? (x - mean) / sd : 0.0;
    }
  }
  return g;
}

}  // namespace dplace
