// Convolutional models at TensorFlow op granularity (Conv2D, FusedBatchNorm, Relu, pooling,
// ConcatV2): inception_v3 (Szegedy et al. 2016; all mixed blocks, optional auxiliary head) and
// resnet50 (He et al. 2016, torchvision's v1.5 with the stride on the 3x3 convolution). Images
// are NHWC float32. See docs/models.md.
//
// Op names: "<block>/<layer>/conv|bn|relu", blocks being the stem layers, "Mixed_5b" ...
// "Mixed_7c", "AuxLogits", "Logits" (Inception) or "stem", "layer<stage>_<block>", "head"
// (ResNet); the expert placement cuts the graph at block boundaries.
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
using models::Tensor;

constexpr double kNormFlops = 8;  // batch norm, per element

enum class Padding { kSame, kValid };

int64_t out_size(int64_t in, int64_t k, int64_t stride, Padding pad) {
  return pad == Padding::kSame ? (in + stride - 1) / stride : (in - k) / stride + 1;
}

// Conv2D (no bias) + FusedBatchNorm (gamma, beta), and Relu when `relu`.
Tensor conv_bn(Net& net, std::string_view name, const Tensor& x, int64_t kh, int64_t kw,
               int64_t cout, int64_t stride, Padding pad, bool relu = true) {
  Net::Scope scope(net, name);
  const int64_t n = x.shape[0], cin = x.shape[3];
  const int64_t ho = out_size(x.shape[1], kh, stride, pad);
  const int64_t wo = out_size(x.shape[2], kw, stride, pad);
  const Tensor conv =
      net.add1({.name = "conv",
                .type = "Conv2D",
                .inputs = {x},
                .outputs = {{n, ho, wo, cout}},
                .flops = 2.0 * static_cast<double>(n * ho * wo * cout) * kh * kw * cin,
                .params = kh * kw * cin * cout});
  const Tensor bn = net.add1({.name = "bn",
                              .type = "FusedBatchNorm",
                              .inputs = {conv},
                              .outputs = {conv.shape},
                              .flops = kNormFlops * static_cast<double>(conv.elements()),
                              .params = 2 * cout});
  return relu ? net.elementwise("Relu", "relu", {bn}, 1) : bn;
}

Tensor pool(Net& net, const char* type, std::string_view name, const Tensor& x, int64_t k,
            int64_t stride, Padding pad) {
  const int64_t n = x.shape[0], c = x.shape[3];
  const int64_t ho = out_size(x.shape[1], k, stride, pad);
  const int64_t wo = out_size(x.shape[2], k, stride, pad);
  return net.add1({.name = std::string(name),
                   .type = type,
                   .inputs = {x},
                   .outputs = {{n, ho, wo, c}},
                   .flops = static_cast<double>(n * ho * wo * c) * k * k});
}

// Global average pool -> [n, c] -> fully connected classes (with bias) -> cross-entropy loss.
Tensor classifier(Net& net, const Tensor& x, int64_t pool_size, Padding pad, const Tensor& labels,
                  int64_t classes) {
  const Tensor p = pool(net, "AvgPool", "avg_pool", x, pool_size, pool_size, pad);
  const Tensor flat = net.reshape("flatten", p, {p.shape[0], p.shape[3]});
  const Tensor logits = net.dense("fc", flat, classes, true);
  return net.sparse_xent("xent", logits, labels)[0];
}

void classification_loss(Net& net, const std::vector<Tensor>& losses) {
  Net::Scope scope(net, "loss");
  Tensor total = losses.at(0);
  if (losses.size() > 1) {
    total = net.add1({.name = "sum",
                      .type = "AddN",
                      .inputs = losses,
                      .outputs = {total.shape},
                      .flops = static_cast<double>(total.elements()) * (losses.size() - 1)});
  }
  net.mean("mean", total);
}

// ------------------------------------------------------------------------------------------
// Inception-V3 (layer names as in TF-slim's inception_v3).

constexpr Padding kSame = Padding::kSame;
constexpr Padding kValid = Padding::kValid;

Tensor inception_a(Net& net, const Tensor& x, int64_t pool_features) {
  const Tensor b0 = conv_bn(net, "Branch_0/Conv2d_0a_1x1", x, 1, 1, 64, 1, kSame);
  Tensor b1 = conv_bn(net, "Branch_1/Conv2d_0a_1x1", x, 1, 1, 48, 1, kSame);
  b1 = conv_bn(net, "Branch_1/Conv2d_0b_5x5", b1, 5, 5, 64, 1, kSame);
  Tensor b2 = conv_bn(net, "Branch_2/Conv2d_0a_1x1", x, 1, 1, 64, 1, kSame);
  b2 = conv_bn(net, "Branch_2/Conv2d_0b_3x3", b2, 3, 3, 96, 1, kSame);
  b2 = conv_bn(net, "Branch_2/Conv2d_0c_3x3", b2, 3, 3, 96, 1, kSame);
  Tensor b3 = pool(net, "AvgPool", "Branch_3/AvgPool_0a_3x3", x, 3, 1, kSame);
  b3 = conv_bn(net, "Branch_3/Conv2d_0b_1x1", b3, 1, 1, pool_features, 1, kSame);
  return net.concat("concat", {b0, b1, b2, b3});
}

Tensor inception_b(Net& net, const Tensor& x) {
  const Tensor b0 = conv_bn(net, "Branch_0/Conv2d_1a_3x3", x, 3, 3, 384, 2, kValid);
  Tensor b1 = conv_bn(net, "Branch_1/Conv2d_0a_1x1", x, 1, 1, 64, 1, kSame);
  b1 = conv_bn(net, "Branch_1/Conv2d_0b_3x3", b1, 3, 3, 96, 1, kSame);
  b1 = conv_bn(net, "Branch_1/Conv2d_1a_3x3", b1, 3, 3, 96, 2, kValid);
  const Tensor b2 = pool(net, "MaxPool", "Branch_2/MaxPool_1a_3x3", x, 3, 2, kValid);
  return net.concat("concat", {b0, b1, b2});
}

Tensor inception_c(Net& net, const Tensor& x, int64_t c7) {
  const Tensor b0 = conv_bn(net, "Branch_0/Conv2d_0a_1x1", x, 1, 1, 192, 1, kSame);
  Tensor b1 = conv_bn(net, "Branch_1/Conv2d_0a_1x1", x, 1, 1, c7, 1, kSame);
  b1 = conv_bn(net, "Branch_1/Conv2d_0b_1x7", b1, 1, 7, c7, 1, kSame);
  b1 = conv_bn(net, "Branch_1/Conv2d_0c_7x1", b1, 7, 1, 192, 1, kSame);
  Tensor b2 = conv_bn(net, "Branch_2/Conv2d_0a_1x1", x, 1, 1, c7, 1, kSame);
  b2 = conv_bn(net, "Branch_2/Conv2d_0b_7x1", b2, 7, 1, c7, 1, kSame);
  b2 = conv_bn(net, "Branch_2/Conv2d_0c_1x7", b2, 1, 7, c7, 1, kSame);
  b2 = conv_bn(net, "Branch_2/Conv2d_0d_7x1", b2, 7, 1, c7, 1, kSame);
  b2 = conv_bn(net, "Branch_2/Conv2d_0e_1x7", b2, 1, 7, 192, 1, kSame);
  Tensor b3 = pool(net, "AvgPool", "Branch_3/AvgPool_0a_3x3", x, 3, 1, kSame);
  b3 = conv_bn(net, "Branch_3/Conv2d_0b_1x1", b3, 1, 1, 192, 1, kSame);
  return net.concat("concat", {b0, b1, b2, b3});
}

Tensor inception_d(Net& net, const Tensor& x) {
  Tensor b0 = conv_bn(net, "Branch_0/Conv2d_0a_1x1", x, 1, 1, 192, 1, kSame);
  b0 = conv_bn(net, "Branch_0/Conv2d_1a_3x3", b0, 3, 3, 320, 2, kValid);
  Tensor b1 = conv_bn(net, "Branch_1/Conv2d_0a_1x1", x, 1, 1, 192, 1, kSame);
  b1 = conv_bn(net, "Branch_1/Conv2d_0b_1x7", b1, 1, 7, 192, 1, kSame);
  b1 = conv_bn(net, "Branch_1/Conv2d_0c_7x1", b1, 7, 1, 192, 1, kSame);
  b1 = conv_bn(net, "Branch_1/Conv2d_1a_3x3", b1, 3, 3, 192, 2, kValid);
  const Tensor b2 = pool(net, "MaxPool", "Branch_2/MaxPool_1a_3x3", x, 3, 2, kValid);
  return net.concat("concat", {b0, b1, b2});
}

Tensor inception_e(Net& net, const Tensor& x) {
  const Tensor b0 = conv_bn(net, "Branch_0/Conv2d_0a_1x1", x, 1, 1, 320, 1, kSame);
  const Tensor b1 = conv_bn(net, "Branch_1/Conv2d_0a_1x1", x, 1, 1, 384, 1, kSame);
  const Tensor b1a = conv_bn(net, "Branch_1/Conv2d_0b_1x3", b1, 1, 3, 384, 1, kSame);
  const Tensor b1b = conv_bn(net, "Branch_1/Conv2d_0c_3x1", b1, 3, 1, 384, 1, kSame);
  Tensor b2 = conv_bn(net, "Branch_2/Conv2d_0a_1x1", x, 1, 1, 448, 1, kSame);
  b2 = conv_bn(net, "Branch_2/Conv2d_0b_3x3", b2, 3, 3, 384, 1, kSame);
  const Tensor b2a = conv_bn(net, "Branch_2/Conv2d_0c_1x3", b2, 1, 3, 384, 1, kSame);
  const Tensor b2b = conv_bn(net, "Branch_2/Conv2d_0d_3x1", b2, 3, 1, 384, 1, kSame);
  Tensor b3 = pool(net, "AvgPool", "Branch_3/AvgPool_0a_3x3", x, 3, 1, kSame);
  b3 = conv_bn(net, "Branch_3/Conv2d_0b_1x1", b3, 1, 1, 192, 1, kSame);
  return net.concat("concat", {b0, b1a, b1b, b2a, b2b, b3});
}

Graph build_inception(const char* model, bool aux, const ModelOptions& options) {
  const models::Sizes s = models::resolve_sizes(model, options, {.batch = 32});
  const int64_t n = s.batch;
  constexpr int64_t kClasses = 1000;
  Net net(model);
  Tensor x, labels;
  {
    Net::Scope scope(net, "inputs");
    x = net.input("images", {n, 299, 299, 3});
    labels = net.input("labels", {n});
  }
  x = conv_bn(net, "Conv2d_1a_3x3", x, 3, 3, 32, 2, kValid);
  x = conv_bn(net, "Conv2d_2a_3x3", x, 3, 3, 32, 1, kValid);
  x = conv_bn(net, "Conv2d_2b_3x3", x, 3, 3, 64, 1, kSame);
  x = pool(net, "MaxPool", "MaxPool_3a_3x3", x, 3, 2, kValid);
  x = conv_bn(net, "Conv2d_3b_1x1", x, 1, 1, 80, 1, kValid);
  x = conv_bn(net, "Conv2d_4a_3x3", x, 3, 3, 192, 1, kValid);
  x = pool(net, "MaxPool", "MaxPool_5a_3x3", x, 3, 2, kValid);
  const std::pair<const char*, int64_t> a_blocks[] = {
      {"Mixed_5b", 32}, {"Mixed_5c", 64}, {"Mixed_5d", 64}};
  for (const auto& [name, pool_features] : a_blocks) {
    Net::Scope scope(net, name);
    x = inception_a(net, x, pool_features);
  }
  {
    Net::Scope scope(net, "Mixed_6a");
    x = inception_b(net, x);
  }
  const std::pair<const char*, int64_t> c_blocks[] = {
      {"Mixed_6b", 128}, {"Mixed_6c", 160}, {"Mixed_6d", 160}, {"Mixed_6e", 192}};
  for (const auto& [name, c7] : c_blocks) {
    Net::Scope scope(net, name);
    x = inception_c(net, x, c7);
  }
  std::vector<Tensor> losses;
  if (aux) {
    Net::Scope scope(net, "AuxLogits");
    Tensor a = pool(net, "AvgPool", "AvgPool_1a_5x5", x, 5, 3, kValid);
    a = conv_bn(net, "Conv2d_1b_1x1", a, 1, 1, 128, 1, kSame);
    a = conv_bn(net, "Conv2d_2a_5x5", a, 5, 5, 768, 1, kValid);
    const Tensor flat = net.reshape("flatten", a, {n, 768});
    const Tensor logits = net.dense("fc", flat, kClasses, true);
    losses.push_back(net.sparse_xent("xent", logits, labels)[0]);
  }
  {
    Net::Scope scope(net, "Mixed_7a");
    x = inception_d(net, x);
  }
  for (const char* name : {"Mixed_7b", "Mixed_7c"}) {
    Net::Scope scope(net, name);
    x = inception_e(net, x);
  }
  {
    Net::Scope scope(net, "Logits");
    losses.insert(losses.begin(), classifier(net, x, 8, kValid, labels, kClasses));
  }
  classification_loss(net, losses);
  return models::finish(std::move(net).build(), options);
}

// ------------------------------------------------------------------------------------------
// ResNet (torchvision's layout: stride on the 3x3 convolution of a bottleneck).

Tensor bottleneck(Net& net, const Tensor& x, int64_t width, int64_t stride, bool project) {
  const Tensor a = conv_bn(net, "conv1", x, 1, 1, width, 1, kSame);
  const Tensor b = conv_bn(net, "conv2", a, 3, 3, width, stride, kSame);
  const Tensor c = conv_bn(net, "conv3", b, 1, 1, 4 * width, 1, kSame, false);
  const Tensor shortcut =
      project ? conv_bn(net, "downsample", x, 1, 1, 4 * width, stride, kSame, false) : x;
  const Tensor sum = net.elementwise("AddV2", "add", {c, shortcut}, 1);
  return net.elementwise("Relu", "relu", {sum}, 1);
}

Tensor basic_block(Net& net, const Tensor& x, int64_t width, int64_t stride, bool project) {
  const Tensor a = conv_bn(net, "conv1", x, 3, 3, width, stride, kSame);
  const Tensor b = conv_bn(net, "conv2", a, 3, 3, width, 1, kSame, false);
  const Tensor shortcut =
      project ? conv_bn(net, "downsample", x, 1, 1, width, stride, kSame, false) : x;
  const Tensor sum = net.elementwise("AddV2", "add", {b, shortcut}, 1);
  return net.elementwise("Relu", "relu", {sum}, 1);
}

constexpr char kResnet[] = "resnet50";

Graph build_resnet(const ModelOptions& options) {
  const models::Sizes s = models::resolve_sizes(kResnet, options, {.batch = 32, .layers = 50});
  std::vector<int> blocks;
  bool bottlenecks = true;
  switch (s.layers) {
    case 18:
      blocks = {2, 2, 2, 2};
      bottlenecks = false;
      break;
    case 34:
      blocks = {3, 4, 6, 3};
      bottlenecks = false;
      break;
    case 50:
      blocks = {3, 4, 6, 3};
      break;
    case 101:
      blocks = {3, 4, 23, 3};
      break;
    case 152:
      blocks = {3, 8, 36, 3};
      break;
    default:
      throw ConfigError(fmt::format(
          "model '{}': --layers must be one of 18, 34, 50, 101, 152, got {}", kResnet, s.layers));
  }
  const int64_t n = s.batch;
  Net net(kResnet);
  Tensor x, labels;
  {
    Net::Scope scope(net, "inputs");
    x = net.input("images", {n, 224, 224, 3});
    labels = net.input("labels", {n});
  }
  {
    Net::Scope scope(net, "stem");
    x = conv_bn(net, "conv1", x, 7, 7, 64, 2, kSame);
    x = pool(net, "MaxPool", "max_pool", x, 3, 2, kSame);
  }
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int64_t width = int64_t{64} << stage;
    for (int j = 0; j < blocks[stage]; ++j) {
      Net::Scope scope(net, fmt::format("layer{}_{}", stage + 1, j));
      const int64_t stride = (j == 0 && stage > 0) ? 2 : 1;
      const int64_t out_channels = bottlenecks ? 4 * width : width;
      const bool project = j == 0 && (stride != 1 || x.shape[3] != out_channels);
      x = bottlenecks ? bottleneck(net, x, width, stride, project)
                      : basic_block(net, x, width, stride, project);
    }
  }
  std::vector<Tensor> losses;
  {
    Net::Scope scope(net, "head");
    losses.push_back(classifier(net, x, x.shape[1], kValid, labels, 1000));
  }
  classification_loss(net, losses);
  return models::finish(std::move(net).build(), options);
}

Placement expert_cnn(const Graph& graph, const Cluster& cluster) {
  return models::contiguous_split(graph, models::expert_devices(cluster));
}

}  // namespace

std::vector<ModelEntry> cnn_models() {
  std::vector<ModelEntry> out;
  ModelEntry inception;
  inception.name = "inception_v3";
  inception.description =
      "Inception-V3, 299x299 images, all mixed blocks, no auxiliary head "
      "(batch 32)";
  inception.build = [](const ModelOptions& o) { return build_inception("inception_v3", false, o); };
  inception.expert = expert_cnn;
  out.push_back(std::move(inception));
  ModelEntry aux;
  aux.name = "inception_v3_aux";
  aux.description = "Inception-V3 with its auxiliary classifier head (batch 32)";
  aux.build = [](const ModelOptions& o) { return build_inception("inception_v3_aux", true, o); };
  aux.expert = expert_cnn;
  out.push_back(std::move(aux));
  ModelEntry resnet;
  resnet.name = kResnet;
  resnet.description = "ResNet-50 v1.5, 224x224 images; --layers 18/34/50/101/152 (batch 32)";
  resnet.build = build_resnet;
  resnet.expert = expert_cnn;
  out.push_back(std::move(resnet));
  return out;
}

}  // namespace dplace
