// The only translation unit of dplace that includes LibTorch (see policy.h).
#include "dplace/placers/rl/policy.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "dplace/core/error.h"

namespace dplace::rl {
namespace {

constexpr float kMaskedLogit = -1e9f;

void configure_torch_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/0);
    torch::set_num_threads(1);
  });
}

// torch's global RNG initialises module weights; construction is serialised so that two policies
// built on different threads still get weights determined by their own seeds.
std::mutex& init_mutex() {
  static std::mutex m;
  return m;
}

struct NetImpl : torch::nn::Module {
  explicit NetImpl(const PolicyConfig& c)
      : embed_in(register_module("embed_in", torch::nn::Linear(c.feature_dim, c.hidden))),
        encoder(
            register_module("encoder", torch::nn::LSTM(torch::nn::LSTMOptions(c.hidden, c.hidden)
                                                           .num_layers(c.layers)
                                                           .batch_first(true)))),
        device_embed(register_module("device_embed",
                                     torch::nn::Embedding(c.num_devices + 1, c.device_embedding))),
        decoder(register_module("decoder",
                                torch::nn::LSTM(torch::nn::LSTMOptions(c.device_embedding, c.hidden)
                                                    .num_layers(c.layers)
                                                    .batch_first(true)))),
        attention(register_module(
            "attention",
            torch::nn::Linear(torch::nn::LinearOptions(c.hidden, c.hidden).bias(false)))),
        combine(register_module("combine", torch::nn::Linear(2 * c.hidden, c.hidden))),
        output(register_module("output", torch::nn::Linear(c.hidden, c.num_devices))) {}

  torch::nn::Linear embed_in;
  torch::nn::LSTM encoder;
  torch::nn::Embedding device_embed;
  torch::nn::LSTM decoder;
  torch::nn::Linear attention;
  torch::nn::Linear combine;
  torch::nn::Linear output;
};
TORCH_MODULE(Net);

struct Encoded {
  torch::Tensor outputs;  // (G, H)
  torch::Tensor keys;     // (G, H): W_a * outputs, the attention keys
  torch::Tensor h;        // (L, 1, H)
  torch::Tensor c;        // (L, 1, H)
};

int64_t as_int64(uint64_t v) {
  int64_t out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}
uint64_t as_uint64(int64_t v) {
  uint64_t out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

}  // namespace

struct Policy::Impl {
  PolicyConfig config;
  Net net{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
  torch::Tensor features;  // (1, G, F)
  torch::Tensor mask;      // (G, D): 0 allowed, kMaskedLogit otherwise

  Encoded encode() {
    torch::Tensor x = torch::tanh(net->embed_in(features));
    auto [outputs, state] = net->encoder->forward(x);
    Encoded e;
    e.outputs = outputs.squeeze(0);
    e.keys = net->attention(e.outputs);
    e.h = std::get<0>(state);
    e.c = std::get<1>(state);
    return e;
  }

  // Logits (..., D) from decoder outputs (..., H).
  torch::Tensor logits(const Encoded& e, const torch::Tensor& dec, const torch::Tensor& mask_rows) {
    torch::Tensor scores = torch::matmul(dec, e.keys.t());
    torch::Tensor weights = torch::softmax(scores, -1);
    torch::Tensor context = torch::matmul(weights, e.outputs);
    torch::Tensor hidden = torch::tanh(net->combine(torch::cat({dec, context}, -1)));
    return net->output(hidden) + mask_rows;
  }

  // Step-by-step decoding of `batch` sequences. With uniforms: inverse-CDF sampling; without:
  // argmax.
  void decode(int batch, const double* uniforms, std::vector<int32_t>& actions) {
    torch::NoGradGuard no_grad;
    const int G = config.num_groups;
    const int D = config.num_devices;
    const Encoded e = encode();
    const int L = config.layers;
    std::tuple<torch::Tensor, torch::Tensor> state{
        e.h.expand({L, batch, config.hidden}).contiguous(),
        e.c.expand({L, batch, config.hidden}).contiguous()};
    torch::Tensor prev = torch::full({batch}, D, torch::kInt64);
    actions.assign(static_cast<size_t>(batch) * G, 0);
    std::vector<int64_t> chosen(batch);
    for (int t = 0; t < G; ++t) {
      torch::Tensor input = net->device_embed(prev).unsqueeze(1);
      auto [out, next_state] = net->decoder->forward(input, state);
      state = next_state;
      torch::Tensor probs = torch::softmax(logits(e, out.squeeze(1), mask[t]), -1).contiguous();
      const float* p = probs.data_ptr<float>();
      for (int k = 0; k < batch; ++k) {
        const float* row = p + static_cast<size_t>(k) * D;
        int choice = -1;
        if (uniforms != nullptr) {
          const double u = uniforms[static_cast<size_t>(k) * G + t];
          double cumulative = 0;
          for (int d = 0; d < D; ++d) {
            if (row[d] <= 0) continue;
            cumulative += row[d];
            choice = d;
            if (u < cumulative) break;
          }
        } else {
          for (int d = 0; d < D; ++d) {
            if (row[d] > 0 && (choice < 0 || row[d] > row[choice])) choice = d;
          }
        }
        DPLACE_CHECK(choice >= 0) << "policy produced no allowed device for group " << t;
        actions[static_cast<size_t>(k) * G + t] = choice;
        chosen[k] = choice;
      }
      prev = torch::tensor(chosen, torch::kInt64);
    }
  }
};

Policy::Policy(const PolicyConfig& config, std::span<const float> features,
               std::span<const uint8_t> allowed)
    : impl_(std::make_unique<Impl>()) {
  configure_torch_once();
  DPLACE_CHECK(config.num_groups > 0 && config.num_devices > 0 && config.feature_dim > 0);
  DPLACE_CHECK(features.size() == static_cast<size_t>(config.num_groups) * config.feature_dim);
  DPLACE_CHECK(allowed.size() == static_cast<size_t>(config.num_groups) * config.num_devices);
  impl_->config = config;
  {
    std::lock_guard<std::mutex> lock(init_mutex());
    torch::manual_seed(config.seed);
    impl_->net = Net(config);
  }
  impl_->optimizer = std::make_unique<torch::optim::Adam>(
      impl_->net->parameters(), torch::optim::AdamOptions(config.learning_rate));
  impl_->features = torch::from_blob(const_cast<float*>(features.data()),
                                     {1, config.num_groups, config.feature_dim}, torch::kFloat32)
                        .clone();
  torch::Tensor mask = torch::zeros({config.num_groups, config.num_devices}, torch::kFloat32);
  float* m = mask.data_ptr<float>();
  for (size_t i = 0; i < allowed.size(); ++i) m[i] = allowed[i] ? 0.0f : kMaskedLogit;
  impl_->mask = mask;
}

Policy::~Policy() = default;

void Policy::sample(int batch, std::span<const double> uniforms, std::vector<int32_t>& actions) {
  DPLACE_CHECK(batch > 0 &&
               uniforms.size() == static_cast<size_t>(batch) * impl_->config.num_groups);
  impl_->net->train();
  impl_->decode(batch, uniforms.data(), actions);
}

std::vector<int32_t> Policy::greedy() {
  std::vector<int32_t> actions;
  impl_->decode(1, nullptr, actions);
  return actions;
}

UpdateStats Policy::update(std::span<const int32_t> actions, std::span<const double> advantages,
                           double entropy_weight) {
  const int G = impl_->config.num_groups;
  const int D = impl_->config.num_devices;
  const int L = impl_->config.layers;
  const int batch = static_cast<int>(advantages.size());
  DPLACE_CHECK(batch > 0 && actions.size() == static_cast<size_t>(batch) * G);
  Net& net = impl_->net;

  torch::Tensor chosen = torch::empty({batch, G}, torch::kInt64);
  int64_t* c = chosen.data_ptr<int64_t>();
  for (size_t i = 0; i < actions.size(); ++i) c[i] = actions[i];
  torch::Tensor adv = torch::empty({batch}, torch::kFloat32);
  for (int k = 0; k < batch; ++k) adv[k] = static_cast<float>(advantages[k]);

  // Teacher forcing: the decoder input at step t is the device chosen at t - 1.
  torch::Tensor prev =
      torch::cat({torch::full({batch, 1}, D, torch::kInt64), chosen.narrow(1, 0, G - 1)}, 1);
  const Encoded e = impl_->encode();
  std::tuple<torch::Tensor, torch::Tensor> state{
      e.h.expand({L, batch, impl_->config.hidden}).contiguous(),
      e.c.expand({L, batch, impl_->config.hidden}).contiguous()};
  auto [dec, unused_state] = net->decoder->forward(net->device_embed(prev), state);
  torch::Tensor log_probs = torch::log_softmax(impl_->logits(e, dec, impl_->mask), -1);  // K,G,D
  torch::Tensor sequence_log_prob = log_probs.gather(2, chosen.unsqueeze(2)).squeeze(2).sum(1);
  torch::Tensor entropy = -(log_probs.exp() * log_probs).sum(2).mean();
  torch::Tensor loss = -(adv * sequence_log_prob).mean() - entropy_weight * entropy;

  impl_->optimizer->zero_grad();
  loss.backward();
  double norm = 0;
  if (impl_->config.grad_clip > 0) {
    norm = torch::nn::utils::clip_grad_norm_(net->parameters(), impl_->config.grad_clip);
  }
  impl_->optimizer->step();
  return {.loss = loss.item<double>(), .entropy = entropy.item<double>(), .grad_norm = norm};
}

void Policy::save(const std::string& path, const TrainerState& state) const {
  torch::serialize::OutputArchive root;
  torch::serialize::OutputArchive net_archive;
  torch::serialize::OutputArchive optimizer_archive;
  impl_->net->save(net_archive);
  impl_->optimizer->save(optimizer_archive);
  root.write("net", net_archive);
  root.write("optimizer", optimizer_archive);
  const PolicyConfig& c = impl_->config;
  root.write("config",
             torch::tensor(std::vector<int64_t>{c.num_groups, c.num_devices, c.feature_dim,
                                                c.hidden, c.layers, c.device_embedding},
                           torch::kInt64));
  root.write("state_ints", torch::tensor(std::vector<int64_t>{state.updates, state.samples,
                                                              state.has_baseline ? 1 : 0,
                                                              as_int64(state.fingerprint)},
                                         torch::kInt64));
  root.write(
      "state_doubles",
      torch::tensor(std::vector<double>{state.baseline, state.best_step_time_s, state.elapsed_s},
                    torch::kFloat64));
  std::vector<int64_t> best(state.best_actions.begin(), state.best_actions.end());
  root.write("best_actions", torch::tensor(best, torch::kInt64));
  try {
    root.save_to(path);
  } catch (const c10::Error& e) {
    throw ConfigError(
        fmt::format("checkpoint '{}': cannot write: {}", path, e.what_without_backtrace()));
  }
}

TrainerState Policy::load(const std::string& path) {
  TrainerState state;
  try {
    torch::serialize::InputArchive root;
    root.load_from(path);
    torch::Tensor config;
    root.read("config", config);
    const PolicyConfig& c = impl_->config;
    const std::vector<int64_t> expected{c.num_groups, c.num_devices, c.feature_dim,
                                        c.hidden,     c.layers,      c.device_embedding};
    if (config.numel() != static_cast<int64_t>(expected.size()) ||
        !torch::equal(config, torch::tensor(expected, torch::kInt64))) {
      throw ConfigError(fmt::format(
          "checkpoint '{}': made for another graph or policy size (groups, devices, features, "
          "hidden, layers, embedding differ)",
          path));
    }
    torch::serialize::InputArchive net_archive;
    torch::serialize::InputArchive optimizer_archive;
    root.read("net", net_archive);
    root.read("optimizer", optimizer_archive);
    impl_->net->load(net_archive);
    impl_->optimizer->load(optimizer_archive);
    torch::Tensor ints;
    torch::Tensor doubles;
    torch::Tensor best;
    root.read("state_ints", ints);
    root.read("state_doubles", doubles);
    root.read("best_actions", best);
    state.updates = ints[0].item<int64_t>();
    state.samples = ints[1].item<int64_t>();
    state.has_baseline = ints[2].item<int64_t>() != 0;
    state.fingerprint = as_uint64(ints[3].item<int64_t>());
    state.baseline = doubles[0].item<double>();
    state.best_step_time_s = doubles[1].item<double>();
    state.elapsed_s = doubles[2].item<double>();
    for (int64_t i = 0; i < best.numel(); ++i) {
      state.best_actions.push_back(static_cast<int32_t>(best[i].item<int64_t>()));
    }
  } catch (const c10::Error& e) {
    throw ConfigError(
        fmt::format("checkpoint '{}': cannot read: {}", path, e.what_without_backtrace()));
  }
  return state;
}

}  // namespace dplace::rl
