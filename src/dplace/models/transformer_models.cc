// Transformer models at TensorFlow op granularity (dense layers as one MatMul with its bias,
// BatchMatMul attention, Softmax, LayerNorm, Gelu): bert_base (Devlin et al. 2019, pre-training
// graph with the masked-LM and next-sentence heads, word embeddings tied to the masked-LM output)
// and gpt2 (Radford et al. 2019, the 124M model, LM head tied to the token embeddings). Dropout
// is left out. See docs/models.md.
//
// Op names: "inputs/...", "embeddings/...", "layer_<i>/...", then the heads ("pooler", "nsp",
// "mlm", "lm_head") and "loss"; the expert placement cuts the graph at those blocks.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/models/builtin_models.h"
#include "dplace/models/expert.h"
#include "dplace/models/net.h"

namespace dplace {
namespace {

using models::Net;
using models::Tensor;

constexpr double kSoftmaxFlops = 5;
constexpr double kGeluFlops = 8;
constexpr int kHeadWidth = 64;  // both models use 64-wide attention heads

struct TransformerSizes {
  models::Sizes s;
  int64_t heads = 0;
};

TransformerSizes transformer_sizes(const char* model, const ModelOptions& options,
                                   const models::SizeDefaults& defaults) {
  TransformerSizes t{models::resolve_sizes(model, options, defaults)};
  if (t.s.hidden % kHeadWidth != 0) {
    throw ConfigError(
        fmt::format("model '{}': --hidden must be a multiple of {} (the head "
                    "width), got {}",
                    model, kHeadWidth, t.s.hidden));
  }
  models::check_max(model, "--layers", t.s.layers, 1000);
  t.heads = t.s.hidden / kHeadWidth;
  return t;
}

// Scaled dot-product attention over q, k, v [b, s, h] with an additive mask; returns [b, s, h].
Tensor attention(Net& net, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 int64_t heads) {
  const int64_t b = q.shape[0], s = q.shape[1], h = q.shape[2];
  const double qk = 2.0 * static_cast<double>(b) * s * s * h;
  const Tensor scores = net.add1({.name = "scores",
                                  .type = "BatchMatMul",
                                  .inputs = {q, k},
                                  .outputs = {{b, heads, s, s}},
                                  .flops = qk});
  const Tensor scaled = net.elementwise("Mul", "scale", {scores}, 1);
  const Tensor masked = net.add1({.name = "mask",
                                  .type = "AddV2",
                                  .inputs = {scaled, mask},
                                  .outputs = {scaled.shape},
                                  .flops = static_cast<double>(scaled.elements())});
  const Tensor probs = net.elementwise("Softmax", "probs", {masked}, kSoftmaxFlops);
  return net.add1({.name = "context",
                   .type = "BatchMatMul",
                   .inputs = {probs, v},
                   .outputs = {q.shape},
                   .flops = qk});
}

// Rows of a shared table [vocab, h] picked by ids [...]: [..., h]. Reads only those rows.
Tensor lookup_rows(Net& net, std::string_view name, const Tensor& table, const Tensor& ids) {
  models::Shape shape = ids.shape;
  shape.push_back(table.shape[1]);
  const double rows_bytes =
      static_cast<double>(ids.elements() * table.shape[1] * models::kElementBytes);
  return net.add1({.name = std::string(name),
                   .type = "Gather",
                   .inputs = {table, ids},
                   .outputs = {std::move(shape)},
                   .bytes_accessed = static_cast<double>(ids.bytes()) + 2 * rows_bytes});
}

// x [rows, h] times the transpose of a tied embedding table [vocab, h]: [rows, vocab].
Tensor tied_logits(Net& net, const Tensor& x, const Tensor& table) {
  const int64_t rows = x.elements() / x.shape.back();
  const int64_t vocab = table.shape[0];
  return net.add1({.name = "logits",
                   .type = "MatMul",
                   .inputs = {x, table},
                   .outputs = {{rows, vocab}},
                   .flops = 2.0 * static_cast<double>(rows) * x.shape.back() * vocab});
}

// ------------------------------------------------------------------------------------------
// BERT (post-LayerNorm encoder).

constexpr char kBert[] = "bert_base";

Tensor bert_layer(Net& net, const Tensor& x, const Tensor& mask, int64_t heads) {
  const int64_t h = x.shape.back();
  Tensor ctx;
  Tensor x1;
  {
    Net::Scope scope(net, "attention");
    const Tensor q = net.dense("query", x, h, true);
    const Tensor k = net.dense("key", x, h, true);
    const Tensor v = net.dense("value", x, h, true);
    ctx = attention(net, q, k, v, mask, heads);
    const Tensor o = net.dense("output", ctx, h, true);
    const Tensor r = net.elementwise("AddV2", "residual", {o, x}, 1);
    x1 = net.layer_norm("layer_norm", r);
  }
  Net::Scope scope(net, "ffn");
  const Tensor f = net.dense("intermediate", x1, 4 * h, true);
  const Tensor g = net.elementwise("Gelu", "gelu", {f}, kGeluFlops);
  const Tensor f2 = net.dense("output", g, h, true);
  const Tensor r2 = net.elementwise("AddV2", "residual", {f2, x1}, 1);
  return net.layer_norm("layer_norm", r2);
}

Graph build_bert(const ModelOptions& options) {
  const TransformerSizes t = transformer_sizes(
      kBert, options, {.batch = 32, .layers = 12, .hidden = 768, .seq = 128, .vocab = 30522});
  const int64_t b = t.s.batch, s = t.s.seq, h = t.s.hidden, v = t.s.vocab;
  const int64_t predictions = std::min<int64_t>(20, s);  // max_predictions_per_seq at seq 128
  const int64_t position_rows = std::max<int64_t>(512, s);
  Net net(kBert);
  Tensor ids, segments, mask, positions, mlm_labels, nsp_labels;
  {
    Net::Scope scope(net, "inputs");
    ids = net.input("input_ids", {b, s});
    segments = net.input("segment_ids", {b, s});
    mask = net.input("attention_mask", {b, 1, 1, s});
    positions = net.input("masked_positions", {b, predictions});
    mlm_labels = net.input("masked_labels", {b * predictions});
    nsp_labels = net.input("next_sentence_labels", {b});
  }
  Tensor word, x;
  {
    Net::Scope scope(net, "embeddings");
    word = net.variable("word_embeddings", {v, h});
    const Tensor tok = lookup_rows(net, "word_lookup", word, ids);
    const Tensor type = net.embedding("token_type_lookup", segments, 2, h);
    const Tensor pos = net.parameter_slice("position_embeddings", position_rows, {s, h});
    x = net.elementwise("AddV2", "add_token_type", {tok, type}, 1);
    x = net.elementwise("AddV2", "add_position", {x, pos}, 1);
    x = net.layer_norm("layer_norm", x);
  }
  for (int i = 0; i < t.s.layers; ++i) {
    Net::Scope scope(net, fmt::format("layer_{}", i));
    x = bert_layer(net, x, mask, t.heads);
  }
  Tensor pooled;
  {
    Net::Scope scope(net, "pooler");
    const Tensor first = net.add1({.name = "first_token",
                                   .type = "StridedSlice",
                                   .inputs = {x},
                                   .outputs = {{b, h}},
                                   .bytes_accessed = 2.0 * models::kElementBytes * b * h});
    pooled = net.elementwise("Tanh", "tanh", {net.dense("dense", first, h, true)}, 4);
  }
  Tensor nsp_loss;
  {
    Net::Scope scope(net, "nsp");
    const Tensor logits = net.dense("logits", pooled, 2, true);
    nsp_loss = net.sparse_xent("xent", logits, nsp_labels)[0];
  }
  Tensor mlm_loss;
  {
    Net::Scope scope(net, "mlm");
    const Tensor picked =
        net.add1({.name = "gather_positions",
                  .type = "GatherNd",
                  .inputs = {x, positions},
                  .outputs = {{b * predictions, h}},
                  .bytes_accessed = static_cast<double>(positions.bytes()) +
                                    2.0 * models::kElementBytes * b * predictions * h});
    Tensor y = net.dense("transform", picked, h, true);
    y = net.elementwise("Gelu", "gelu", {y}, kGeluFlops);
    y = net.layer_norm("layer_norm", y);
    Tensor logits = tied_logits(net, y, word);
    logits = net.add1({.name = "output_bias",
                       .type = "BiasAdd",
                       .inputs = {logits},
                       .outputs = {logits.shape},
                       .flops = static_cast<double>(logits.elements()),
                       .params = v});
    mlm_loss = net.sparse_xent("xent", logits, mlm_labels)[0];
  }
  {
    Net::Scope scope(net, "loss");
    const Tensor a = net.mean("mlm_mean", mlm_loss);
    const Tensor c = net.mean("nsp_mean", nsp_loss);
    net.elementwise("AddV2", "total", {a, c}, 1);
  }
  return models::finish(std::move(net).build(), options);
}

// ------------------------------------------------------------------------------------------
// GPT-2 (pre-LayerNorm decoder with a causal mask).

constexpr char kGpt2[] = "gpt2";

Tensor gpt2_layer(Net& net, const Tensor& x, const Tensor& mask, int64_t heads) {
  const int64_t h = x.shape.back();
  Tensor r;
  {
    const Tensor a = net.layer_norm("ln_1", x);
    Net::Scope scope(net, "attn");
    const Tensor qkv = net.dense("c_attn", a, 3 * h, true);
    const std::vector<Tensor> split = net.add({.name = "split",
                                               .type = "Split",
                                               .inputs = {qkv},
                                               .outputs = {x.shape, x.shape, x.shape}});
    const Tensor ctx = attention(net, split[0], split[1], split[2], mask, heads);
    const Tensor o = net.dense("c_proj", ctx, h, true);
    r = net.elementwise("AddV2", "residual", {x, o}, 1);
  }
  const Tensor m = net.layer_norm("ln_2", r);
  Net::Scope scope(net, "mlp");
  const Tensor f = net.dense("c_fc", m, 4 * h, true);
  const Tensor g = net.elementwise("Gelu", "gelu", {f}, kGeluFlops);
  const Tensor f2 = net.dense("c_proj", g, h, true);
  return net.elementwise("AddV2", "residual", {r, f2}, 1);
}

Graph build_gpt2(const ModelOptions& options) {
  const TransformerSizes t = transformer_sizes(
      kGpt2, options, {.batch = 4, .layers = 12, .hidden = 768, .seq = 1024, .vocab = 50257});
  const int64_t b = t.s.batch, s = t.s.seq, h = t.s.hidden, v = t.s.vocab;
  const int64_t position_rows = std::max<int64_t>(1024, s);
  Net net(kGpt2);
  Tensor ids, labels, mask;
  {
    Net::Scope scope(net, "inputs");
    ids = net.input("ids", {b, s});
    labels = net.input("labels", {b * s});
    mask = net.input("causal_mask", {1, 1, s, s});
  }
  Tensor wte, x;
  {
    Net::Scope scope(net, "embeddings");
    wte = net.variable("wte", {v, h});
    const Tensor tok = lookup_rows(net, "token_lookup", wte, ids);
    const Tensor pos = net.parameter_slice("wpe", position_rows, {s, h});
    x = net.elementwise("AddV2", "add_position", {tok, pos}, 1);
  }
  for (int i = 0; i < t.s.layers; ++i) {
    Net::Scope scope(net, fmt::format("layer_{}", i));
    x = gpt2_layer(net, x, mask, t.heads);
  }
  Tensor loss;
  {
    Net::Scope scope(net, "lm_head");
    const Tensor y = net.layer_norm("ln_f", x);
    const Tensor logits = tied_logits(net, y, wte);
    loss = net.sparse_xent("xent", logits, labels)[0];
  }
  {
    Net::Scope scope(net, "loss");
    net.mean("mean", loss);
  }
  return models::finish(std::move(net).build(), options);
}

Placement expert_transformer(const Graph& graph, const Cluster& cluster) {
  return models::contiguous_split(graph, models::expert_devices(cluster));
}

}  // namespace

std::vector<ModelEntry> transformer_models() {
  std::vector<ModelEntry> out;
  ModelEntry bert;
  bert.name = kBert;
  bert.description =
      "BERT-base pre-training: 12 layers, hidden 768, masked-LM and next-sentence "
      "heads (batch 32, seq 128, vocab 30522)";
  bert.build = build_bert;
  bert.expert = expert_transformer;
  out.push_back(std::move(bert));
  ModelEntry gpt2;
  gpt2.name = kGpt2;
  gpt2.description =
      "GPT-2 small language model: 12 layers, hidden 768 (batch 4, seq 1024, "
      "vocab 50257)";
  gpt2.build = build_gpt2;
  gpt2.expert = expert_transformer;
  out.push_back(std::move(gpt2));
  return out;
}

}  // namespace dplace
