// Recurrent models, unrolled in time at TensorFlow op granularity (static_rnn with
// BasicLSTMCell): rnnlm (Mirhoseini et al. 2017), nmt (their attentional NMT) and gnmt4/gnmt8
// (the GNMT-style 4- and 8-layer NMT of Mirhoseini et al. 2018). See docs/models.md.
//
// Op names (the expert placements parse them): "<part>/l<layer>/t<step>/<op>" for LSTM cells,
// "<part>/l<layer>/kernel|bias" for their shared weights, "attention/...", "softmax/...",
// "<src|tgt>_embedding/...", "inputs/...", "loss/...".
#include <fmt/format.h>

#include <string>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/models/builtin_models.h"
#include "dplace/models/expert.h"
#include "dplace/models/net.h"

namespace dplace {
namespace {

using models::Net;
using models::Shape;
using models::Tensor;

constexpr double kTranscendentalFlops = 4;  // sigmoid, tanh per element
constexpr double kSoftmaxFlops = 5;

struct LstmWeights {
  Tensor kernel;  // [input + units, 4 units]
  Tensor bias;    // [4 units]
};

struct LstmState {
  Tensor c;
  Tensor h;
};

LstmWeights lstm_weights(Net& net, int64_t input, int64_t units) {
  return {net.variable("kernel", {input + units, 4 * units}), net.variable("bias", {4 * units})};
}

// One BasicLSTMCell step: concat([inputs..., h]) -> MatMul -> BiasAdd -> Split(i, j, f, o);
// c' = c * sigmoid(f + 1) + sigmoid(i) * tanh(j); h' = tanh(c') * sigmoid(o). 14 ops.
LstmState lstm_step(Net& net, std::vector<Tensor> inputs, const LstmState& prev,
                    const LstmWeights& w) {
  inputs.push_back(prev.h);
  const Tensor x = net.concat("concat", inputs);
  const Tensor gates = net.matmul("matmul", x, w.kernel);
  const Tensor biased = net.elementwise("BiasAdd", "bias_add", {gates, w.bias}, 1);
  const int64_t batch = prev.h.shape[0];
  const int64_t units = prev.h.shape[1];
  const std::vector<Tensor> ijfo =
      net.add({.name = "split",
               .type = "Split",
               .inputs = {biased},
               .outputs = {{batch, units}, {batch, units}, {batch, units}, {batch, units}}});
  const Tensor f = net.elementwise("Add", "forget_bias", {ijfo[2]}, 1);
  const Tensor sf = net.elementwise("Sigmoid", "sigmoid_f", {f}, kTranscendentalFlops);
  const Tensor si = net.elementwise("Sigmoid", "sigmoid_i", {ijfo[0]}, kTranscendentalFlops);
  const Tensor tj = net.elementwise("Tanh", "tanh_j", {ijfo[1]}, kTranscendentalFlops);
  const Tensor so = net.elementwise("Sigmoid", "sigmoid_o", {ijfo[3]}, kTranscendentalFlops);
  const Tensor cf = net.elementwise("Mul", "mul_cf", {prev.c, sf}, 1);
  const Tensor ij = net.elementwise("Mul", "mul_ij", {si, tj}, 1);
  const Tensor c = net.elementwise("AddV2", "new_c", {cf, ij}, 1);
  const Tensor tc = net.elementwise("Tanh", "tanh_c", {c}, kTranscendentalFlops);
  const Tensor h = net.elementwise("Mul", "new_h", {tc, so}, 1);
  return {c, h};
}

// Zero initial state (TensorFlow's cell.zero_state): one op whose output serves as c and h.
LstmState zero_state(Net& net, int64_t batch, int64_t units) {
  const Tensor z = net.add1({.name = "zero_state", .type = "Zeros", .outputs = {{batch, units}}});
  return {z, z};
}

// Token ids [batch, steps] -> one embedding lookup -> Unpack into per-step [batch, width].
std::vector<Tensor> embed_steps(Net& net, const Tensor& ids, int64_t vocab, int64_t width) {
  const Tensor e = net.embedding("lookup", ids, vocab, width);
  const int64_t batch = ids.shape[0];
  const int64_t steps = ids.shape[1];
  return net.add({.name = "unstack",
                  .type = "Unpack",
                  .inputs = {e},
                  .outputs = std::vector<Shape>(steps, Shape{batch, width})});
}

struct Softmax {
  Tensor w;
  std::optional<Tensor> b;
};

// Per-step output projection and loss; returns the per-example loss [batch].
Tensor softmax_step(Net& net, const Tensor& h, const Softmax& s, const Tensor& labels) {
  Tensor logits = net.matmul("logits", h, s.w);
  if (s.b) logits = net.elementwise("BiasAdd", "bias_add", {logits, *s.b}, 1);
  return net.sparse_xent("xent", logits, labels)[0];
}

// Sum of per-step losses, then the mean: the sink the gradient starts from.
void total_loss(Net& net, const std::vector<Tensor>& losses) {
  Net::Scope scope(net, "loss");
  const Tensor sum = net.add1({.name = "sum",
                               .type = "AddN",
                               .inputs = losses,
                               .outputs = {losses.at(0).shape},
                               .flops = static_cast<double>(losses.size() - 1) *
                                        static_cast<double>(losses[0].elements())});
  net.mean("mean", sum);
}

// ------------------------------------------------------------------------------------------
// rnnlm

constexpr char kRnnlm[] = "rnnlm";

Graph build_rnnlm(const ModelOptions& options) {
  const models::Sizes s = models::resolve_sizes(
      kRnnlm, options, {.batch = 64, .layers = 2, .hidden = 2048, .seq = 40, .vocab = 10000});
  models::check_max(kRnnlm, "--seq", s.seq, 1000);
  models::check_max(kRnnlm, "--layers", s.layers, 64);
  const int64_t b = s.batch, h = s.hidden, v = s.vocab;
  Net net(kRnnlm);
  Tensor ids, labels;
  {
    Net::Scope scope(net, "inputs");
    ids = net.input("ids", {b, s.seq});
    labels = net.input("labels", {b, s.seq});
  }
  std::vector<Tensor> x;
  {
    Net::Scope scope(net, "embedding");
    x = embed_steps(net, ids, v, h);
  }
  for (int l = 0; l < s.layers; ++l) {
    Net::Scope layer(net, fmt::format("lstm/l{}", l));
    const LstmWeights w = lstm_weights(net, h, h);
    LstmState state = zero_state(net, b, h);
    for (int t = 0; t < s.seq; ++t) {
      Net::Scope step(net, fmt::format("t{}", t));
      state = lstm_step(net, {x[t]}, state, w);
      x[t] = state.h;
    }
  }
  std::vector<Tensor> losses;
  {
    Net::Scope scope(net, "softmax");
    const Softmax sm{net.variable("w", {h, v}), net.variable("b", {v})};
    for (int t = 0; t < s.seq; ++t) {
      Net::Scope step(net, fmt::format("t{}", t));
      losses.push_back(softmax_step(net, x[t], sm, labels));
    }
  }
  total_loss(net, losses);
  return models::finish(std::move(net).build(), options);
}

// Layer k of a "<part>/l<k>/..." name ("lstm", "encoder", "decoder"); 0 for other names.
size_t layer_of(std::string_view name) {
  const std::string_view c = models::name_component(name, 1);
  if (c.size() < 2 || c[0] != 'l') return 0;
  size_t layer = 0;
  for (char ch : c.substr(1)) {
    if (ch < '0' || ch > '9') return 0;
    layer = layer * 10 + static_cast<size_t>(ch - '0');
  }
  return layer;
}

// Each LSTM layer on its own GPU (layers cut evenly when there are more layers than GPUs), the
// embedding with the first layer, the softmax on a GPU of its own when one is left, else with
// the last layer.
Placement expert_rnnlm(const Graph& graph, const Cluster& cluster) {
  const std::vector<DeviceId> devices = models::expert_devices(cluster);
  const size_t k = devices.size();
  size_t layers = 1;
  for (const Op& op : graph.ops()) {
    if (models::name_component(op.name, 0) == "lstm")
      layers = std::max(layers, layer_of(op.name) + 1);
  }
  auto layer_slot = [&](size_t l) { return models::layer_slot(l, layers, k); };
  const size_t softmax_slot = k > layers ? layers : layer_slot(layers - 1);
  return models::place_by_name(graph, devices, [&](std::string_view name) -> size_t {
    const std::string_view part = models::name_component(name, 0);
    if (part == "lstm") return layer_slot(layer_of(name));
    if (part == "softmax" || part == "loss") return softmax_slot;
    if (models::name_component(name, 1) == "labels") return softmax_slot;
    return layer_slot(0);  // inputs, embedding
  });
}

// ------------------------------------------------------------------------------------------
// nmt and gnmt

struct NmtConfig {
  const char* name;
  bool gnmt;  // GNMT-style: bidirectional bottom encoder layer, residual connections from the
              // third layer, attention from the bottom decoder layer fed to every layer
  int default_layers;
  int default_vocab;
};

// Bahdanau attention for one decoder step: score = v . tanh(keys + W_q q), alignments =
// softmax(score), context = alignments . memory. 6 ops.
Tensor attention_step(Net& net, const Tensor& query, const Tensor& keys, const Tensor& memory,
                      const Tensor& wq, const Tensor& v) {
  const int64_t batch = memory.shape[0], steps = memory.shape[1], units = memory.shape[2];
  const Tensor pq = net.matmul("query", query, wq);
  const Tensor sum = net.add1({.name = "add_keys",
                               .type = "AddV2",
                               .inputs = {keys, pq},
                               .outputs = {keys.shape},
                               .flops = static_cast<double>(keys.elements())});
  const Tensor th = net.elementwise("Tanh", "tanh", {sum}, kTranscendentalFlops);
  const Tensor score = net.reshape("score_shape", net.matmul("score", th, v), {batch, steps});
  const Tensor align = net.elementwise("Softmax", "alignments", {score}, kSoftmaxFlops);
  return net.add1({.name = "context",
                   .type = "BatchMatMul",
                   .inputs = {align, memory},
                   .outputs = {{batch, units}},
                   .flops = 2.0 * batch * steps * units});
}

Graph build_nmt(const NmtConfig& cfg, const ModelOptions& options) {
  const models::Sizes s = models::resolve_sizes(cfg.name, options,
                                                {.batch = 64,
                                                 .layers = cfg.default_layers,
                                                 .hidden = 1024,
                                                 .seq = 40,
                                                 .vocab = cfg.default_vocab});
  models::check_max(cfg.name, "--seq", s.seq, 1000);
  models::check_max(cfg.name, "--layers", s.layers, 64);
  if (cfg.gnmt && s.layers < 2) {
    throw ConfigError(
        fmt::format("model '{}': --layers must be >= 2 (a bidirectional layer "
                    "and at least one more), got {}",
                    cfg.name, s.layers));
  }
  const int64_t b = s.batch, h = s.hidden, v = s.vocab, steps = s.seq;
  const int layers = s.layers;
  Net net(cfg.name);
  Tensor src_ids, tgt_ids, labels;
  {
    Net::Scope scope(net, "inputs");
    src_ids = net.input("src_ids", {b, steps});
    tgt_ids = net.input("tgt_ids", {b, steps});
    labels = net.input("labels", {b, steps});
  }
  std::vector<Tensor> x;
  {
    Net::Scope scope(net, "src_embedding");
    x = embed_steps(net, src_ids, v, h);
  }

  // Encoder. final[l] is the state layer l hands to decoder layer l.
  std::vector<LstmState> final_state;
  int first_uni = 0;
  if (cfg.gnmt) {
    Net::Scope layer(net, "encoder/l0");
    std::vector<Tensor> fw(steps), bw(steps);
    {
      Net::Scope dir(net, "fw");
      const LstmWeights w = lstm_weights(net, h, h);
      LstmState st = zero_state(net, b, h);
      for (int t = 0; t < steps; ++t) {
        Net::Scope step(net, fmt::format("t{}", t));
        st = lstm_step(net, {x[t]}, st, w);
        fw[t] = st.h;
      }
    }
    LstmState bw_final;
    {
      Net::Scope dir(net, "bw");
      const LstmWeights w = lstm_weights(net, h, h);
      LstmState st = zero_state(net, b, h);
      for (int t = steps - 1; t >= 0; --t) {
        Net::Scope step(net, fmt::format("t{}", t));
        st = lstm_step(net, {x[t]}, st, w);
        bw[t] = st.h;
      }
      bw_final = st;
    }
    for (int t = 0; t < steps; ++t) {
      x[t] = net.concat(fmt::format("t{}/concat_fw_bw", t), {fw[t], bw[t]});
    }
    final_state.push_back(bw_final);
    first_uni = 1;
  }
  for (int l = first_uni; l < layers; ++l) {
    Net::Scope layer(net, fmt::format("encoder/l{}", l));
    const int64_t in = x[0].shape[1];
    const LstmWeights w = lstm_weights(net, in, h);
    const bool residual = cfg.gnmt && l >= 2;
    LstmState st = zero_state(net, b, h);
    for (int t = 0; t < steps; ++t) {
      Net::Scope step(net, fmt::format("t{}", t));
      st = lstm_step(net, {x[t]}, st, w);
      x[t] = residual ? net.elementwise("AddV2", "residual", {st.h, x[t]}, 1) : st.h;
    }
    final_state.push_back(st);
  }

  // Attention memory: the top encoder outputs, and their projection (the keys).
  Tensor memory, keys, wq, va;
  std::optional<Tensor> wa;
  {
    Net::Scope scope(net, "attention");
    memory = net.add1({.name = "memory", .type = "Pack", .inputs = x, .outputs = {{b, steps, h}}});
    keys = net.dense("keys", memory, h, false);
    wq = net.variable("query_kernel", {h, h});
    va = net.variable("v", {h, 1});
    if (!cfg.gnmt) wa = net.variable("output_kernel", {2 * h, h});
  }

  std::vector<Tensor> y;
  {
    Net::Scope scope(net, "tgt_embedding");
    y = embed_steps(net, tgt_ids, v, h);
  }
  std::vector<LstmWeights> dec_w;
  for (int l = 0; l < layers; ++l) {
    Net::Scope layer(net, fmt::format("decoder/l{}", l));
    // Layer 0 reads [embedding, previous attention]; GNMT's upper layers read [h below, context].
    const int64_t in = (l == 0 || cfg.gnmt) ? 2 * h : h;
    dec_w.push_back(lstm_weights(net, in, h));
  }
  Softmax sm;
  {
    Net::Scope scope(net, "softmax");
    sm.w = net.variable("w", {h, v});
    if (!cfg.gnmt) sm.b = net.variable("b", {v});
  }
  Tensor attn_prev;
  {
    Net::Scope scope(net, "attention");
    attn_prev = net.add1({.name = "initial", .type = "Zeros", .outputs = {{b, h}}});
  }
  std::vector<LstmState> state = final_state;
  std::vector<Tensor> losses;
  for (int t = 0; t < steps; ++t) {
    const std::string step = fmt::format("t{}", t);
    Tensor below;
    {
      Net::Scope layer(net, "decoder/l0");
      Net::Scope st(net, step);
      state[0] = lstm_step(net, {y[t], attn_prev}, state[0], dec_w[0]);
      below = state[0].h;
    }
    if (cfg.gnmt) {
      // The bottom layer's output queries the attention; the context feeds every upper layer now
      // and the bottom layer at the next step.
      Tensor context;
      {
        Net::Scope attn(net, "attention");
        Net::Scope st(net, step);
        context = attention_step(net, below, keys, memory, wq, va);
      }
      attn_prev = context;
      for (int l = 1; l < layers; ++l) {
        Net::Scope layer(net, fmt::format("decoder/l{}", l));
        Net::Scope st(net, step);
        state[l] = lstm_step(net, {below, context}, state[l], dec_w[l]);
        below = l >= 2 ? net.elementwise("AddV2", "residual", {state[l].h, below}, 1) : state[l].h;
      }
    } else {
      for (int l = 1; l < layers; ++l) {
        Net::Scope layer(net, fmt::format("decoder/l{}", l));
        Net::Scope st(net, step);
        state[l] = lstm_step(net, {below}, state[l], dec_w[l]);
        below = state[l].h;
      }
      // The top layer's output queries the attention; [output, context] -> attention vector,
      // which feeds the softmax now and the bottom layer at the next step (input feeding).
      Net::Scope attn(net, "attention");
      Net::Scope st(net, step);
      const Tensor context = attention_step(net, below, keys, memory, wq, va);
      const Tensor cat = net.concat("concat", {below, context});
      attn_prev = net.matmul("output", cat, *wa);
      below = attn_prev;
    }
    Net::Scope scope(net, "softmax");
    Net::Scope st(net, step);
    losses.push_back(softmax_step(net, below, sm, labels));
  }
  total_loss(net, losses);
  return models::finish(std::move(net).build(), options);
}

// nmt (Mirhoseini et al. 2017): each LSTM layer, encoder and decoder alike, on its own GPU when
// there are enough, else encoder and decoder layer l share GPU l (layers cut evenly); the
// attention and the softmax with the last decoder layer. gnmt (Wu et al. 2016; TensorFlow NMT's
// GNMT model): encoder and decoder layer l on GPU l (cut evenly), the attention with the bottom
// decoder layer that queries it, the softmax with the top decoder layer. Embeddings with the
// first layer of their side.
Placement expert_nmt(const NmtConfig& cfg, const Graph& graph, const Cluster& cluster) {
  const std::vector<DeviceId> devices = models::expert_devices(cluster);
  const size_t k = devices.size();
  size_t layers = 1;
  for (const Op& op : graph.ops()) {
    const std::string_view part = models::name_component(op.name, 0);
    if (part == "encoder" || part == "decoder") layers = std::max(layers, layer_of(op.name) + 1);
  }
  const bool own_gpu_each = !cfg.gnmt && 2 * layers <= k;
  auto enc = [&](size_t l) { return models::layer_slot(l, layers, k); };
  auto dec = [&](size_t l) { return own_gpu_each ? layers + l : models::layer_slot(l, layers, k); };
  const size_t top = dec(layers - 1);
  const size_t attention = cfg.gnmt ? dec(0) : top;
  return models::place_by_name(graph, devices, [&](std::string_view name) -> size_t {
    const std::string_view part = models::name_component(name, 0);
    if (part == "encoder") return enc(layer_of(name));
    if (part == "decoder") return dec(layer_of(name));
    if (part == "attention") return attention;
    if (part == "softmax" || part == "loss") return top;
    if (part == "tgt_embedding") return dec(0);
    const std::string_view input = models::name_component(name, 1);
    if (input == "labels") return top;
    if (input == "tgt_ids") return dec(0);
    return enc(0);  // src_ids, src_embedding
  });
}

constexpr NmtConfig kNmt{"nmt", false, 2, 40000};
constexpr NmtConfig kGnmt4{"gnmt4", true, 4, 32000};
constexpr NmtConfig kGnmt8{"gnmt8", true, 8, 32000};

ModelEntry nmt_entry(const NmtConfig& cfg, std::string description) {
  ModelEntry e;
  e.name = cfg.name;
  e.description = std::move(description);
  e.build = [cfg](const ModelOptions& o) { return build_nmt(cfg, o); };
  e.expert = [cfg](const Graph& g, const Cluster& c) { return expert_nmt(cfg, g, c); };
  return e;
}

}  // namespace

std::vector<ModelEntry> rnn_models() {
  std::vector<ModelEntry> out;
  ModelEntry rnnlm;
  rnnlm.name = kRnnlm;
  rnnlm.description =
      "2-layer LSTM language model unrolled in time (batch 64, hidden 2048, seq 40, vocab 10000)";
  rnnlm.build = build_rnnlm;
  rnnlm.expert = expert_rnnlm;
  out.push_back(std::move(rnnlm));
  out.push_back(
      nmt_entry(kNmt,
                "attentional LSTM encoder-decoder, Bahdanau attention (batch 64, 2 layers "
                "of 1024 per side, seq 40, vocab 40000)"));
  out.push_back(
      nmt_entry(kGnmt4,
                "GNMT-style NMT: bidirectional bottom encoder layer, residuals, attention "
                "(batch 64, 4 layers (--layers) of 1024 per side, seq 40, vocab 32000)"));
  out.push_back(
      nmt_entry(kGnmt8,
                "GNMT-style NMT: bidirectional bottom encoder layer, residuals, attention "
                "(batch 64, 8 layers (--layers) of 1024 per side, seq 40, vocab 32000)"));
  return out;
}

}  // namespace dplace
