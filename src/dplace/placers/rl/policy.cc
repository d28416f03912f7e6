// The only translation unit of dplace that includes LibTorch (see policy.h), built as the loadable
// module dplace_rl_torch.so; its one exported symbol is dplace_rl_torch_module() (torch_module.h).
//
// Layout of the fast engine (row-major float buffers; G groups, K samples of one chunk, H hidden,
// E device embedding, D devices, F features). The encoder runs once per batch; the decoder and its
// backward pass run per chunk of samples (ChunkTrace), chunks in parallel on the pool:
//   encoder  X (G x H) = tanh(features W_in^T + b_in); Ge (G x 4H) LSTM gates after activation,
//            in PyTorch's order [i f g o]; Ce, TCe (G x H) cell state and tanh(cell); enc (G x H)
//            hidden states; keys (G x H) = enc W_a^T.
//   decoder  one row per step and distinct prefix: the decoder's state at step t depends only on
//            the devices chosen before t, so samples of a chunk that agree on them share a row
//            (prefix sharing: a converged policy samples the same prefixes over and over, and
//            those rows are computed once). Per row: Hp (H) the previous hidden state; Gd (4H)
//            gates; Cd, TCd (H); HC (2H) the hidden state h and the attention context side by
//            side (the input of W_c); A (G) attention weights; U (H) = tanh(W_c [h; ctx] + b_c);
//            Pr (D) device probabilities. Each sample draws its own device from its row.
// Backward (REINFORCE + entropy), with dl = d loss / d logits per row (summed over the row's
// samples; the backward pass is linear in it, so a shared row is back-propagated once):
//   dW_o = dl^T U, dU = dl W_o, dUpre = dU (1 - U^2), dW_c = dUpre^T HC, dHC = dUpre W_c,
//   dA = dctx enc^T, dS = A (dA - rowsum(A dA)), dh += dS keys, dkeys = dS^T h, denc += A^T dctx,
//   then the LSTM recurrences backwards in time (the only sequential part; a row's recurrent
//   gradients are added to its parent row's), then the weight gradients of both LSTMs as single
//   products over all steps. The chunks' decoder gradients and their contributions to denc and
//   dkeys are summed in chunk order before the encoder's pass.
#include "dplace/placers/rl/policy.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>

#include "dplace/core/error.h"
#include "dplace/core/files.h"
#include "dplace/core/fingerprint.h"
#include "dplace/placers/rl/torch_module.h"

// Fortran BLAS, provided by the BLAS library LibTorch links (OpenBLAS with libopenblas0).
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);

namespace dplace::rl {
namespace {

// The error of a policy whose probabilities for group t are not numbers.
ConfigError diverged(int t) {
  return ConfigError(fmt::format(
      "rl: the policy's probabilities for group {} are not numbers: the learning diverged (try a "
      "smaller lr, entropy or imitation)",
      t));
}

constexpr float kMaskedLogit = -1e9f;

void configure_threads_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    // One BLAS thread. The loader set OPENBLAS_NUM_THREADS=1 while this module loaded, for an
    // OpenBLAS loaded with it; an OpenBLAS loaded before (the dplace binary's, through Clp) read
    // the variable earlier and is told directly. The variable is not left set: measure-cmd
    // inherits the environment.
    using SetThreads = void (*)(int);
    if (auto* set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
      set(1);
    }
    torch::set_num_threads(1);
  });
}

// torch's global RNG initialises the weights; construction is serialised so that two policies
// built on different threads still get weights determined by their own seeds.
std::mutex& init_mutex() {
  static std::mutex m;
  return m;
}

// Row-major C (M x N, leading dimension ldc) = alpha op(A) op(B) + beta C, with op(A) M x Kd and
// op(B) Kd x N; `ta` / `tb`: A / B are stored transposed (Kd x M / N x Kd).
void gemm(bool ta, bool tb, int M, int N, int Kd, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  if (Kd == 0) {
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        float& c = C[static_cast<size_t>(i) * ldc + j];
        c = beta == 0 ? 0.0f : c * beta;  // as BLAS: with beta 0, C is not read
      }
    }
    return;
  }
  // Column-major BLAS computes C^T = op(B)^T op(A)^T.
  const char trans_b = tb ? 'T' : 'N';
  const char trans_a = ta ? 'T' : 'N';
  sgemm_(&trans_b, &trans_a, &N, &M, &Kd, &alpha, B, &ldb, A, &lda, &beta, C, &ldc);
}

// dst (cols x rows, row-major) = the transpose of src (rows x cols, row-major). The decoder keeps
// transposed copies of the matrices it multiplies at every step: OpenBLAS's kernels for a product
// with a transposed right-hand side repack that operand on every call, which for the decoder's
// few rows per step cost more than the arithmetic (2.5-3.5x slower at 7-16 rows, measured).
void transpose(const float* src, int rows, int cols, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      dst[static_cast<size_t>(c) * rows + r] = src[static_cast<size_t>(r) * cols + c];
    }
  }
}

torch::Tensor view(float* p, int64_t n) { return torch::from_blob(p, {n}, torch::kFloat32); }

void sigmoid_inplace(float* p, int64_t n) { view(p, n).sigmoid_(); }
void tanh_inplace(float* p, int64_t n) { view(p, n).tanh_(); }

// Applies the LSTM gate activations in place to rows x 4H pre-activations [i f g o]:
// sigmoid on i, f, o and tanh on g (as 2 sigmoid(2x) - 1, so that one vectorised call does all).
void lstm_gates(float* z, int rows, int H) {
  for (int r = 0; r < rows; ++r) {
    float* g = z + static_cast<size_t>(r) * 4 * H + 2 * H;
    for (int j = 0; j < H; ++j) g[j] *= 2.0f;
  }
  sigmoid_inplace(z, static_cast<int64_t>(rows) * 4 * H);
  for (int r = 0; r < rows; ++r) {
    float* g = z + static_cast<size_t>(r) * 4 * H + 2 * H;
    for (int j = 0; j < H; ++j) g[j] = 2.0f * g[j] - 1.0f;
  }
}

// Back-propagates one row through one LSTM step (gates z after activation, tc = tanh(cell),
// c_prev the previous cell or null for zeros). dh = dh_out + dh_rec is the gradient on the row's
// hidden state; dc holds the gradient on its cell coming from the next step and is replaced by the
// gradient on c_prev. Writes the gradient on the pre-activation gates to dz (4H).
void lstm_step_backward(const float* z, const float* tc, const float* c_prev, const float* dh_out,
                        const float* dh_rec, float* dc, float* dz, int H) {
  for (int j = 0; j < H; ++j) {
    const float i = z[j], f = z[H + j], g = z[2 * H + j], o = z[3 * H + j];
    const float cp = c_prev != nullptr ? c_prev[j] : 0.0f;
    const float dh = dh_out[j] + dh_rec[j];
    const float dcj = dc[j] + dh * o * (1.0f - tc[j] * tc[j]);
    dz[j] = dcj * g * i * (1.0f - i);
    dz[H + j] = dcj * cp * f * (1.0f - f);
    dz[2 * H + j] = dcj * i * (1.0f - g * g);
    dz[3 * H + j] = dh * tc[j] * o * (1.0f - o);
    dc[j] = dcj * f;
  }
}

// The parameters, registered so that LibTorch serialises them and Adam updates them.
struct ParamsImpl : torch::nn::Module {
  explicit ParamsImpl(const PolicyConfig& c) {
    const int H = c.hidden;
    const int F = c.feature_dim;
    const int D = c.num_devices;
    const int E = c.device_embedding;
    auto uniform = [](std::vector<int64_t> shape, double fan_in) {
      const double k = 1.0 / std::sqrt(fan_in);
      return (torch::rand(shape, torch::kFloat32) * (2 * k) - k).contiguous();
    };
    w_in = register_parameter("w_in", uniform({H, F}, F));
    b_in = register_parameter("b_in", uniform({H}, F));
    we_ih = register_parameter("enc_w_ih", uniform({4 * H, H}, H));
    we_hh = register_parameter("enc_w_hh", uniform({4 * H, H}, H));
    be = register_parameter("enc_b", uniform({4 * H}, H));
    emb = register_parameter("device_embedding", torch::randn({D + 1, E}, torch::kFloat32));
    wd_ih = register_parameter("dec_w_ih", uniform({4 * H, E}, H));
    wd_hh = register_parameter("dec_w_hh", uniform({4 * H, H}, H));
    bd = register_parameter("dec_b", uniform({4 * H}, H));
    w_a = register_parameter("attention", uniform({H, H}, H));
    w_c = register_parameter("combine_w", uniform({H, 2 * H}, 2 * H));
    b_c = register_parameter("combine_b", uniform({H}, 2 * H));
    w_o = register_parameter("output_w", uniform({D, H}, H));
    b_o = register_parameter("output_b", uniform({D}, H));
  }
  // In this order everywhere (gradients, clipping, the reference check).
  std::vector<torch::Tensor> list() const {
    return {w_in, b_in, we_ih, we_hh, be, emb, wd_ih, wd_hh, bd, w_a, w_c, b_c, w_o, b_o};
  }
  torch::Tensor w_in, b_in, we_ih, we_hh, be, emb, wd_ih, wd_hh, bd, w_a, w_c, b_c, w_o, b_o;
};
TORCH_MODULE(Params);

float* ptr(const torch::Tensor& t) { return t.data_ptr<float>(); }

enum class DecodeMode { kSample, kGreedy };

// Encoder activations, shared by every sample of a batch.
struct EncoderTrace {
  std::vector<float> X, Ge, Ce, TCe, enc, keys;
  std::vector<float> we_hh_t;  // H x 4H: the encoder's recurrent weights, transposed
};

// Decoder activations of one chunk of samples, and the buffers and partial results of its
// backward pass; kept between updates so that the buffers are reused.
struct ChunkTrace {
  int first = 0;  // index of the chunk's first sample in the batch
  int batch = 0;  // samples in the chunk
  int free =
      0;  // the first `free` samples are decoded freely (sampled or greedy), the others forced
  std::vector<int32_t> actions;  // batch x G, sample-major
  // Rows (see the file comment): those of step t are [step_begin[t], step_begin[t + 1]); a row's
  // parent is the row of step t - 1 it continues (-1 at t = 0) and input the device fed to it (D:
  // the start token); row_of[t * batch + k] is sample k's row at step t.
  std::vector<int32_t> step_begin, parent, input, row_of;
  std::vector<float> Gd, Cd, TCd, HC, Hp, A, U, Pr;
  std::vector<float> scores, logits;
  // Backward buffers.
  std::vector<float> dl, du, dhc, da, dz, dh_rec, dc_rec, dh_prev, dproj;
  // Backward results: gradients of the decoder-side parameters (indices of ParamsImpl::list();
  // the encoder-side entries stay zero), the gradient reaching the encoder outputs, the attention
  // keys and the encoder's final state, and the chunk's terms of the loss.
  std::vector<std::vector<float>> grads;
  std::vector<float> denc, dkeys, dh_final, dc_final;
  double log_prob_term = 0;
  double entropy_sum = 0;
};

// Activations of one batch (see the file comment).
struct Trace {
  int batch = 0;
  uint64_t version = 0;  // of the weights that produced it
  bool valid = false;
  std::vector<int32_t> actions;  // batch x G, sample-major
  EncoderTrace encoder;
  std::vector<float> proj;  // (D + 1) x 4H decoder input projections of the device embeddings
  // Transposed copies (see transpose()) of what the decoder multiplies at every step: keys_t
  // (H x G), wd_hh_t (H x 4H), w_c_t (2H x H), w_o_t (H x D).
  std::vector<float> keys_t, wd_hh_t, w_c_t, w_o_t;
  std::vector<ChunkTrace> chunks;
};

// A checkpoint file is one header line, "dplace.rl-checkpoint/3 SIZE HASH\n" (SIZE bytes of
// payload, HASH its FNV-1a in hex), then LibTorch's archive. LibTorch does not check its archive
// before parsing it, and some damage crashes its parser, so the hash is checked first.
constexpr std::string_view kCheckpointMagic = "dplace.rl-checkpoint/3";

// The payload's FNV-1a as 16 hex digits, the header's HASH.
std::string checkpoint_checksum(const std::string& payload) {
  Fingerprint hash;
  hash.add_bytes(payload);
  return fmt::format("{:016x}", hash.value());
}

void write_checkpoint_file(const std::string& path, torch::serialize::OutputArchive& root) {
  std::ostringstream payload_stream;
  root.save_to(payload_stream);
  const std::string payload = payload_stream.str();
  // Written whole (core/files.h): a run killed while writing keeps its last checkpoint, and two
  // runs saving to one path each leave a whole checkpoint (a fixed "PATH.tmp" was shared).
  const std::string file =
      fmt::format("{} {} {}\n", kCheckpointMagic, payload.size(), checkpoint_checksum(payload)) +
      payload;
  if (const std::string why = write_file_whole(path, file); !why.empty()) {
    throw ConfigError(fmt::format("checkpoint '{}': cannot write the file ({})", path, why));
  }
}

// Checks the header and the hash, then parses the payload into `root`.
void read_checkpoint_file(const std::string& path, torch::serialize::InputArchive& root) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError(fmt::format("checkpoint '{}': not a regular file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("checkpoint '{}': cannot open file", path));
  std::string header;
  std::getline(in, header);
  std::istringstream fields(header);
  std::string magic, hash_hex;
  uint64_t size = 0;
  fields >> magic >> size >> hash_hex;
  if (magic != kCheckpointMagic || !fields || hash_hex.size() != 16) {
    throw ConfigError(fmt::format(
        "checkpoint '{}': not a dplace rl checkpoint of this version (first line should start "
        "with '{}')",
        path, kCheckpointMagic));
  }
  const std::string payload{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (payload.size() != size) {
    throw ConfigError(
        fmt::format("checkpoint '{}': damaged: {} bytes of payload, the header says {}", path,
                    payload.size(), size));
  }
  if (checkpoint_checksum(payload) != hash_hex) {
    throw ConfigError(
        fmt::format("checkpoint '{}': damaged: the payload does not match its checksum", path));
  }
  std::istringstream payload_in(payload);
  root.load_from(payload_in);
}

// The TrainerState part of a checkpoint archive.
TrainerState read_state(torch::serialize::InputArchive& root, const std::string& path) {
  torch::Tensor ints;
  torch::Tensor doubles;
  torch::Tensor best;
  root.read("state_ints", ints);
  root.read("state_doubles", doubles);
  root.read("best_actions", best);
  if (ints.numel() != 9 || doubles.numel() != 4) {
    throw ConfigError(fmt::format("checkpoint '{}': not written by this version of dplace", path));
  }
  TrainerState state;
  state.updates = ints[0].item<int64_t>();
  state.samples = ints[1].item<int64_t>();
  state.has_baseline = ints[2].item<int64_t>() != 0;
  const int64_t fingerprint = ints[3].item<int64_t>();
  std::memcpy(&state.fingerprint, &fingerprint, sizeof fingerprint);
  state.restarts = ints[4].item<int64_t>();
  state.samples_at_restart = ints[5].item<int64_t>();
  state.stalled_updates = ints[6].item<int64_t>();
  state.level = ints[7].item<int64_t>();
  state.refinements = ints[8].item<int64_t>();
  state.baseline = doubles[0].item<double>();
  state.best_step_time_s = doubles[1].item<double>();
  state.elapsed_s = doubles[2].item<double>();
  state.oom_step_time_s = doubles[3].item<double>();
  for (int64_t i = 0; i < best.numel(); ++i) {
    state.best_actions.push_back(static_cast<int32_t>(best[i].item<int64_t>()));
  }
  return state;
}

// Returns read(), with what LibTorch throws on a damaged or unreadable file (c10::Error, and the
// std::runtime_error of its archive reader) turned into a ConfigError naming the checkpoint.
template <typename Read>
auto with_checkpoint_read_errors(const std::string& path, Read&& read) {
  try {
    return read();
  } catch (const c10::Error& e) {
    throw ConfigError(
        fmt::format("checkpoint '{}': cannot read: {}", path, e.what_without_backtrace()));
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("checkpoint '{}': cannot read: {}", path, e.what()));
  }
}

TrainerState read_trainer_state_file(const std::string& path) {
  return with_checkpoint_read_errors(path, [&path] {
    torch::serialize::InputArchive root;
    read_checkpoint_file(path, root);
    return read_state(root, path);
  });
}

// The Policy of policy.h on LibTorch; the module's make_policy builds it.
class TorchPolicy final : public Policy {
 public:
  TorchPolicy(const PolicyConfig& config, std::span<const float> features,
              std::span<const uint8_t> allowed);
  void sample(int batch, std::span<const double> uniforms, std::vector<int32_t>& actions,
              std::span<const int32_t> forced) override;
  std::vector<int32_t> greedy() override;
  void use_parallel_for(ParallelFor run) override;
  void set_deadline(std::chrono::steady_clock::time_point deadline) override;
  void reinitialize(uint64_t seed) override;
  UpdateStats update(std::span<const int32_t> actions, std::span<const double> advantages,
                     double entropy_weight) override;
  double check_gradients(std::span<const int32_t> actions, std::span<const double> advantages,
                         double entropy_weight) override;
  void save(const std::string& path, const TrainerState& state) const override;
  TrainerState load(const std::string& path) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct TorchPolicy::Impl {
  PolicyConfig config;
  Params params{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
  std::vector<float> features;  // G x F
  std::vector<float> mask;      // G x D: 0 allowed, kMaskedLogit otherwise
  uint64_t version = 0;         // bumped by every weight change
  Trace trace;
  ParallelFor parallel_for;  // empty: chunks run on the calling thread
  std::optional<std::chrono::steady_clock::time_point> deadline;  // see set_deadline()

  int G() const { return config.num_groups; }
  int H() const { return config.hidden; }
  int D() const { return config.num_devices; }
  int E() const { return config.device_embedding; }
  int F() const { return config.feature_dim; }

  // Runs fn(i) for each chunk i, through parallel_for when there is one.
  void for_each_chunk(size_t n, const std::function<void(size_t)>& fn) {
    if (parallel_for && n > 1) {
      parallel_for(n, fn);
    } else {
      for (size_t i = 0; i < n; ++i) fn(i);
    }
  }

  // Throws PolicyDeadlinePassed once the deadline has passed.
  void check_deadline() const {
    if (deadline && std::chrono::steady_clock::now() >= *deadline) throw PolicyDeadlinePassed();
  }

  // The products over every decoder row of a chunk (up to batch x groups rows) are cut into blocks
  // of rows of about config.block_multiply_adds each, with a deadline check between blocks. At
  // the default sizes (hidden 64, at most 9 x 256 rows per chunk) every product is one block, so
  // the arithmetic is that of one product; a product cut into blocks sums its rows block by block,
  // which rounds differently.
  int rows_per_block(int64_t multiply_adds_per_row) const {
    return static_cast<int>(std::clamp<int64_t>(
        config.block_multiply_adds / std::max<int64_t>(multiply_adds_per_row, 1), 1,
        std::numeric_limits<int>::max()));
  }

  // C (M x N) = A^T B, summed over R rows of A (R x M, leading dimension lda) and B (R x N, ldb).
  void gemm_sum_over_rows(int M, int N, int R, const float* A, int lda, const float* B, int ldb,
                          float* C, int ldc) const {
    if (R == 0) gemm(true, false, M, N, 0, 1, A, lda, B, ldb, 0, C, ldc);
    const int block = rows_per_block(int64_t{M} * N);
    for (int r0 = 0; r0 < R; r0 += block) {
      if (r0 > 0) check_deadline();
      const int n = std::min(block, R - r0);
      gemm(true, false, M, N, n, 1, A + static_cast<size_t>(r0) * lda, lda,
           B + static_cast<size_t>(r0) * ldb, ldb, r0 == 0 ? 0.0f : 1.0f, C, ldc);
    }
  }

  // C (R x N) = beta C + A op(B) for A with R rows (leading dimension lda), row block by row block.
  void gemm_per_row(bool tb, int R, int N, int Kd, const float* A, int lda, const float* B, int ldb,
                    float beta, float* C, int ldc) const {
    const int block = rows_per_block(int64_t{N} * Kd);
    for (int r0 = 0; r0 < R; r0 += block) {
      if (r0 > 0) check_deadline();
      const int n = std::min(block, R - r0);
      gemm(false, tb, n, N, Kd, 1, A + static_cast<size_t>(r0) * lda, lda, B, ldb, beta,
           C + static_cast<size_t>(r0) * ldc, ldc);
    }
  }

  // ---- fast engine: forward ----

  void encode(EncoderTrace& tr) {
    const int G = this->G(), H = this->H(), F = this->F();
    const ParamsImpl& p = *params;
    tr.X.resize(static_cast<size_t>(G) * H);
    for (int g = 0; g < G; ++g) std::memcpy(&tr.X[g * H], ptr(p.b_in), H * sizeof(float));
    gemm(false, true, G, H, F, 1, features.data(), F, ptr(p.w_in), F, 1, tr.X.data(), H);
    tanh_inplace(tr.X.data(), static_cast<int64_t>(G) * H);
    tr.Ge.resize(static_cast<size_t>(G) * 4 * H);
    for (int g = 0; g < G; ++g) std::memcpy(&tr.Ge[g * 4 * H], ptr(p.be), 4 * H * sizeof(float));
    gemm(false, true, G, 4 * H, H, 1, tr.X.data(), H, ptr(p.we_ih), H, 1, tr.Ge.data(), 4 * H);
    tr.Ce.resize(static_cast<size_t>(G) * H);
    tr.TCe.resize(static_cast<size_t>(G) * H);
    tr.enc.resize(static_cast<size_t>(G) * H);
    transpose(ptr(p.we_hh), 4 * H, H, tr.we_hh_t);
    for (int t = 0; t < G; ++t) {
      check_deadline();  // one row per step, but 4,096 groups at hidden 1,024 took 14 s
      float* z = &tr.Ge[static_cast<size_t>(t) * 4 * H];
      if (t > 0)
        gemm(false, false, 1, 4 * H, H, 1, &tr.enc[(t - 1) * H], H, tr.we_hh_t.data(), 4 * H, 1, z,
             4 * H);
      lstm_gates(z, 1, H);
      float* c = &tr.Ce[t * H];
      for (int j = 0; j < H; ++j) {
        const float prev = t > 0 ? tr.Ce[(t - 1) * H + j] : 0.0f;
        c[j] = z[H + j] * prev + z[j] * z[2 * H + j];
      }
      float* tc = &tr.TCe[t * H];
      std::memcpy(tc, c, H * sizeof(float));
      tanh_inplace(tc, H);
      for (int j = 0; j < H; ++j) tr.enc[t * H + j] = z[3 * H + j] * tc[j];
    }
    tr.keys.assign(static_cast<size_t>(G) * H, 0.0f);
    gemm(false, true, G, H, H, 1, tr.enc.data(), H, ptr(p.w_a), H, 0, tr.keys.data(), H);
  }

  // Runs the encoder once and the decoder for `batch` sequences decoded with `mode` (kSample:
  // with `uniforms`, batch x G; kGreedy) followed by `num_forced` sequences forced to `forced`
  // (num_forced x G); fills tr (and tr.actions, (batch + num_forced) x G, sample-major). The
  // batch + num_forced sequences are cut into max(1, floor(n / config.chunk)) chunks of
  // config.chunk, the last one taking the remainder: the chunks depend only on the total, so a
  // pass recomputed with every sequence forced (update()) has the same chunks, and the forced
  // best placement of self-imitation shares its prefixes with the last chunk's samples.
  void decode(Trace& tr, DecodeMode mode, int batch, const double* uniforms, int num_forced,
              const int32_t* forced) {
    torch::NoGradGuard no_grad;
    const int G = this->G(), H = this->H(), D = this->D(), E = this->E();
    const ParamsImpl& p = *params;
    tr.valid = false;  // until the pass is complete (it may stop at the deadline)
    encode(tr.encoder);
    tr.batch = batch + num_forced;
    tr.version = version;
    // Input projections of every device embedding (and the start token D), biases included.
    tr.proj.resize(static_cast<size_t>(D + 1) * 4 * H);
    for (int d = 0; d <= D; ++d) std::memcpy(&tr.proj[d * 4 * H], ptr(p.bd), 4 * H * sizeof(float));
    gemm(false, true, D + 1, 4 * H, E, 1, ptr(p.emb), E, ptr(p.wd_ih), E, 1, tr.proj.data(), 4 * H);
    transpose(tr.encoder.keys.data(), G, H, tr.keys_t);
    transpose(ptr(p.wd_hh), 4 * H, H, tr.wd_hh_t);
    transpose(ptr(p.w_c), H, 2 * H, tr.w_c_t);
    transpose(ptr(p.w_o), D, H, tr.w_o_t);
    const int chunk = config.chunk;
    const int total = batch + num_forced;
    const int num_chunks = std::max(1, total / chunk);
    tr.chunks.resize(static_cast<size_t>(num_chunks));
    for (int i = 0; i < num_chunks; ++i) {
      ChunkTrace& ch = tr.chunks[i];
      ch.first = i * chunk;
      ch.batch = (i + 1 == num_chunks ? total : (i + 1) * chunk) - ch.first;
      ch.free = std::clamp(batch - ch.first, 0, ch.batch);
    }
    for_each_chunk(tr.chunks.size(), [&](size_t i) {
      ChunkTrace& ch = tr.chunks[i];
      const double* u = ch.free > 0 && uniforms != nullptr
                            ? uniforms + static_cast<size_t>(ch.first) * G
                            : nullptr;
      const int32_t* f = ch.free < ch.batch
                             ? forced + static_cast<size_t>(std::max(ch.first, batch) - batch) * G
                             : nullptr;
      decode_chunk(tr, ch, mode, u, f);
    });
    tr.actions.clear();
    for (const ChunkTrace& ch : tr.chunks) {
      tr.actions.insert(tr.actions.end(), ch.actions.begin(), ch.actions.end());
    }
    tr.valid = true;
  }

  // The first ch.free samples are decoded with `mode` (uniforms: ch.free x G, for kSample), the
  // others are forced to `forced` ((ch.batch - ch.free) x G).
  void decode_chunk(const Trace& tr, ChunkTrace& ch, DecodeMode mode, const double* uniforms,
                    const int32_t* forced) {
    torch::NoGradGuard no_grad;  // per thread
    const int G = this->G(), H = this->H(), D = this->D(), K = ch.batch;
    const ParamsImpl& p = *params;
    const EncoderTrace& en = tr.encoder;
    ch.actions.assign(static_cast<size_t>(K) * G, 0);
    // At most one row per sample and step; most runs use far fewer (prefix sharing).
    const size_t max_rows = static_cast<size_t>(G) * K;
    ch.Gd.resize(max_rows * 4 * H);
    ch.Cd.resize(max_rows * H);
    ch.TCd.resize(max_rows * H);
    ch.HC.resize(max_rows * 2 * H);
    ch.Hp.resize(max_rows * H);
    ch.A.resize(max_rows * G);
    ch.U.resize(max_rows * H);
    ch.Pr.resize(max_rows * D);
    ch.row_of.assign(max_rows, 0);
    ch.step_begin.assign(static_cast<size_t>(G) + 1, 0);
    // Step 0: every sample starts from the encoder's final state and the start token.
    ch.parent.assign(1, -1);
    ch.input.assign(1, D);
    const float* h_init = &en.enc[(G - 1) * H];
    const float* c_init = &en.Ce[(G - 1) * H];

    ch.scores.resize(static_cast<size_t>(K) * G);
    ch.logits.resize(static_cast<size_t>(K) * D);
    for (int t = 0; t < G; ++t) {
      check_deadline();
      const size_t row0 = static_cast<size_t>(ch.step_begin[t]);
      const int n = static_cast<int>(ch.parent.size() - row0);
      float* z = &ch.Gd[row0 * 4 * H];
      float* hp = &ch.Hp[row0 * H];
      for (int i = 0; i < n; ++i) {
        const size_t r = row0 + i;
        std::memcpy(z + static_cast<size_t>(i) * 4 * H, &tr.proj[ch.input[r] * 4 * H],
                    4 * H * sizeof(float));
        const float* h_prev = t > 0 ? &ch.HC[static_cast<size_t>(ch.parent[r]) * 2 * H] : h_init;
        std::memcpy(hp + static_cast<size_t>(i) * H, h_prev, H * sizeof(float));
      }
      gemm(false, false, n, 4 * H, H, 1, hp, H, tr.wd_hh_t.data(), 4 * H, 1, z, 4 * H);
      lstm_gates(z, n, H);
      float* c = &ch.Cd[row0 * H];
      float* tc = &ch.TCd[row0 * H];
      for (int i = 0; i < n; ++i) {
        const float* zi = z + static_cast<size_t>(i) * 4 * H;
        const float* cp = t > 0 ? &ch.Cd[static_cast<size_t>(ch.parent[row0 + i]) * H] : c_init;
        for (int j = 0; j < H; ++j) c[i * H + j] = zi[H + j] * cp[j] + zi[j] * zi[2 * H + j];
      }
      std::memcpy(tc, c, static_cast<size_t>(n) * H * sizeof(float));
      tanh_inplace(tc, static_cast<int64_t>(n) * H);
      float* hc = &ch.HC[row0 * 2 * H];
      for (int i = 0; i < n; ++i) {
        const float* zi = z + static_cast<size_t>(i) * 4 * H;
        for (int j = 0; j < H; ++j) hc[i * 2 * H + j] = zi[3 * H + j] * tc[i * H + j];
      }
      // Attention over the encoder outputs.
      float* scores = ch.scores.data();
      gemm(false, false, n, G, H, 1, hc, 2 * H, tr.keys_t.data(), G, 0, scores, G);
      float* a = &ch.A[row0 * G];
      {
        torch::Tensor out = torch::from_blob(a, {n, G}, torch::kFloat32);
        at::_softmax_out(out, torch::from_blob(scores, {n, G}, torch::kFloat32), 1, false);
      }
      gemm(false, false, n, H, G, 1, a, G, en.enc.data(), H, 0, hc + H, 2 * H);
      float* u = &ch.U[row0 * H];
      for (int i = 0; i < n; ++i) std::memcpy(u + i * H, ptr(p.b_c), H * sizeof(float));
      gemm(false, false, n, H, 2 * H, 1, hc, 2 * H, tr.w_c_t.data(), H, 1, u, H);
      tanh_inplace(u, static_cast<int64_t>(n) * H);
      float* logits = ch.logits.data();
      for (int i = 0; i < n; ++i) std::memcpy(&logits[i * D], ptr(p.b_o), D * sizeof(float));
      gemm(false, false, n, D, H, 1, u, H, tr.w_o_t.data(), D, 1, logits, D);
      float* pr = &ch.Pr[row0 * D];
      const float* m = &mask[static_cast<size_t>(t) * D];
      for (int i = 0; i < n; ++i) {
        float* l = &logits[i * D];
        float top = -INFINITY;
        for (int d = 0; d < D; ++d) {
          l[d] += m[d];
          top = std::max(top, l[d]);
        }
        float sum = 0;
        for (int d = 0; d < D; ++d) {
          pr[i * D + d] = m[d] < 0 ? 0.0f : std::exp(l[d] - top);
          sum += pr[i * D + d];
        }
        // Weights that stopped being numbers make every probability NaN, which sampling would
        // read as the last device, allowed or not.
        if (!std::isfinite(sum) || !(sum > 0)) throw diverged(t);
        for (int d = 0; d < D; ++d) pr[i * D + d] /= sum;
      }
      // Each sample chooses from its row's distribution; samples that share a row and choose the
      // same device share a row at the next step.
      const size_t next0 = ch.parent.size();
      if (t + 1 < G) ch.step_begin[t + 1] = static_cast<int32_t>(next0);
      for (int k = 0; k < K; ++k) {
        const int32_t r = ch.row_of[static_cast<size_t>(t) * K + k];
        const float* row = &ch.Pr[static_cast<size_t>(r) * D];
        int choice = -1;
        if (k >= ch.free) {
          choice = forced[static_cast<size_t>(k - ch.free) * G + t];
          // The mask, not the probability: a very confident policy may give a forced device a
          // probability that rounds to 0.
          DPLACE_CHECK(choice >= 0 && choice < D && mask[static_cast<size_t>(t) * D + choice] == 0)
              << "forced action " << choice << " is not an allowed device of group " << t;
        } else if (mode == DecodeMode::kSample) {
          const double uk = uniforms[static_cast<size_t>(k) * G + t];
          double cumulative = 0;
          for (int d = 0; d < D; ++d) {
            if (row[d] <= 0) continue;
            cumulative += row[d];
            choice = d;
            if (uk < cumulative) break;
          }
        } else {
          for (int d = 0; d < D; ++d) {
            if (row[d] > 0 && (choice < 0 || row[d] > row[choice])) choice = d;
          }
        }
        if (choice < 0) throw diverged(t);
        ch.actions[static_cast<size_t>(k) * G + t] = choice;
        if (t + 1 == G) continue;
        size_t next = next0;
        while (next < ch.parent.size() && (ch.parent[next] != r || ch.input[next] != choice)) {
          ++next;
        }
        if (next == ch.parent.size()) {
          ch.parent.push_back(r);
          ch.input.push_back(choice);
        }
        ch.row_of[static_cast<size_t>(t + 1) * K + k] = static_cast<int32_t>(next);
      }
    }
    ch.step_begin[G] = static_cast<int32_t>(ch.parent.size());
  }

  // ---- fast engine: backward ----

  struct Gradients {
    std::vector<torch::Tensor> grads;  // matching ParamsImpl::list()
    double loss = 0;
    double entropy = 0;
    double decoder_rows_fraction = 1;
  };

  // The decoder side of the backward pass for one chunk; `batch` is the whole batch's size (the
  // loss is a mean over it). Leaves its results in ch (see ChunkTrace).
  void backward_chunk(const Trace& tr, ChunkTrace& ch, std::span<const double> advantages,
                      int batch, double entropy_weight) {
    torch::NoGradGuard no_grad;  // per thread
    const int G = this->G(), H = this->H(), D = this->D(), E = this->E(), K = ch.batch;
    const ParamsImpl& p = *params;
    const EncoderTrace& en = tr.encoder;
    const std::vector<torch::Tensor> list = p.list();
    ch.grads.resize(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      ch.grads[i].assign(static_cast<size_t>(list[i].numel()), 0.0f);
    }
    float* g_emb = ch.grads[5].data();
    float* g_wd_ih = ch.grads[6].data();
    float* g_wd_hh = ch.grads[7].data();
    float* g_bd = ch.grads[8].data();
    float* g_w_c = ch.grads[10].data();
    float* g_b_c = ch.grads[11].data();
    float* g_w_o = ch.grads[12].data();
    float* g_b_o = ch.grads[13].data();

    // d loss / d logits, summed over the samples that share each row.
    const size_t rows = static_cast<size_t>(ch.step_begin[G]);
    ch.dl.assign(rows * D, 0.0f);
    float* dl = ch.dl.data();
    const double beta = entropy_weight / batch;
    ch.log_prob_term = 0;
    ch.entropy_sum = 0;
    for (int t = 0; t < G; ++t) {
      for (int k = 0; k < K; ++k) {
        const size_t r = static_cast<size_t>(ch.row_of[static_cast<size_t>(t) * K + k]);
        const float* pr = &ch.Pr[r * D];
        const int a = ch.actions[static_cast<size_t>(k) * G + t];
        const double advantage = advantages[ch.first + k];
        double ent = 0;
        for (int d = 0; d < D; ++d) {
          if (pr[d] > 0) ent -= pr[d] * std::log(static_cast<double>(pr[d]));
        }
        ch.entropy_sum += ent;
        ch.log_prob_term += advantage * std::log(static_cast<double>(pr[a]));
        const double coef = advantage / batch;
        for (int d = 0; d < D; ++d) {
          double v = coef * (pr[d] - (d == a ? 1.0 : 0.0));
          if (pr[d] > 0) v += beta * pr[d] * (std::log(static_cast<double>(pr[d])) + ent);
          dl[r * D + d] += static_cast<float>(v);
        }
      }
    }

    // Output layer and combine layer, all steps at once.
    const int R = static_cast<int>(rows);
    check_deadline();
    gemm_sum_over_rows(D, H, R, dl, D, ch.U.data(), H, g_w_o, H);
    for (size_t r = 0; r < rows; ++r) {
      for (int d = 0; d < D; ++d) g_b_o[d] += dl[r * D + d];
    }
    ch.du.resize(rows * H);
    float* du = ch.du.data();
    gemm_per_row(false, R, H, D, dl, D, ptr(p.w_o), H, 0, du, H);
    for (size_t i = 0; i < rows * H; ++i) du[i] *= 1.0f - ch.U[i] * ch.U[i];
    gemm_sum_over_rows(H, 2 * H, R, du, H, ch.HC.data(), 2 * H, g_w_c, 2 * H);
    for (size_t r = 0; r < rows; ++r) {
      for (int j = 0; j < H; ++j) g_b_c[j] += du[r * H + j];
    }
    ch.dhc.resize(rows * 2 * H);  // [dh | dctx]
    float* dhc = ch.dhc.data();
    gemm_per_row(false, R, 2 * H, H, du, H, ptr(p.w_c), 2 * H, 0, dhc, 2 * H);

    // Attention.
    ch.da.resize(rows * G);
    float* da = ch.da.data();
    gemm_per_row(true, R, G, H, dhc + H, 2 * H, en.enc.data(), H, 0, da, G);
    ch.denc.resize(static_cast<size_t>(G) * H);
    gemm_sum_over_rows(G, H, R, ch.A.data(), G, dhc + H, 2 * H, ch.denc.data(), H);
    for (size_t r = 0; r < rows; ++r) {
      const float* a = &ch.A[r * G];
      float* ds = &da[r * G];
      double dot = 0;
      for (int g = 0; g < G; ++g) dot += static_cast<double>(a[g]) * ds[g];
      for (int g = 0; g < G; ++g) ds[g] = a[g] * (ds[g] - static_cast<float>(dot));
    }
    // dh += dS keys; dkeys = dS^T h.
    gemm_per_row(false, R, H, G, da, G, en.keys.data(), H, 1, dhc, 2 * H);
    ch.dkeys.resize(static_cast<size_t>(G) * H);
    gemm_sum_over_rows(G, H, R, da, G, ch.HC.data(), 2 * H, ch.dkeys.data(), H);

    // Decoder LSTM, backwards in time. A row's gradients on its previous hidden state and cell go
    // to its parent row (at t = 0: to the encoder's final state).
    ch.dz.resize(rows * 4 * H);
    float* dz = ch.dz.data();
    ch.dh_rec.assign(rows * H, 0.0f);
    ch.dc_rec.assign(rows * H, 0.0f);
    ch.dh_prev.resize(static_cast<size_t>(K) * H);
    ch.dh_final.assign(H, 0.0f);
    ch.dc_final.assign(H, 0.0f);
    const float* c_init = &en.Ce[(G - 1) * H];
    for (int t = G - 1; t >= 0; --t) {
      check_deadline();
      const size_t row0 = static_cast<size_t>(ch.step_begin[t]);
      const int n = ch.step_begin[t + 1] - ch.step_begin[t];
      for (int i = 0; i < n; ++i) {
        const size_t r = row0 + i;
        const float* cp = t > 0 ? &ch.Cd[static_cast<size_t>(ch.parent[r]) * H] : c_init;
        lstm_step_backward(&ch.Gd[r * 4 * H], &ch.TCd[r * H], cp, &dhc[r * 2 * H],
                           &ch.dh_rec[r * H], &ch.dc_rec[r * H], &dz[r * 4 * H], H);
      }
      gemm(false, false, n, H, 4 * H, 1, &dz[row0 * 4 * H], 4 * H, ptr(p.wd_hh), H, 0,
           ch.dh_prev.data(), H);
      for (int i = 0; i < n; ++i) {
        const size_t r = row0 + i;
        float* dh_to =
            t > 0 ? &ch.dh_rec[static_cast<size_t>(ch.parent[r]) * H] : ch.dh_final.data();
        float* dc_to =
            t > 0 ? &ch.dc_rec[static_cast<size_t>(ch.parent[r]) * H] : ch.dc_final.data();
        for (int j = 0; j < H; ++j) {
          dh_to[j] += ch.dh_prev[static_cast<size_t>(i) * H + j];
          dc_to[j] += ch.dc_rec[r * H + j];
        }
      }
    }
    // Recurrent weights: Hp holds each row's previous hidden state.
    gemm_sum_over_rows(4 * H, H, R, dz, 4 * H, ch.Hp.data(), H, g_wd_hh, H);
    // Input projections: a row's dz goes to the row of the device it was fed.
    ch.dproj.assign(static_cast<size_t>(D + 1) * 4 * H, 0.0f);
    for (size_t r = 0; r < rows; ++r) {
      const float* src = &dz[r * 4 * H];
      float* dst = &ch.dproj[static_cast<size_t>(ch.input[r]) * 4 * H];
      for (int j = 0; j < 4 * H; ++j) dst[j] += src[j];
    }
    gemm(true, false, 4 * H, E, D + 1, 1, ch.dproj.data(), 4 * H, ptr(p.emb), E, 0, g_wd_ih, E);
    gemm(false, false, D + 1, E, 4 * H, 1, ch.dproj.data(), 4 * H, ptr(p.wd_ih), E, 0, g_emb, E);
    for (int d = 0; d <= D; ++d) {
      for (int j = 0; j < 4 * H; ++j) g_bd[j] += ch.dproj[d * 4 * H + j];
    }
  }

  Gradients backward(Trace& tr, std::span<const double> advantages, double entropy_weight) {
    torch::NoGradGuard no_grad;
    const int G = this->G(), H = this->H(), F = this->F();
    const int K = tr.batch;
    const ParamsImpl& p = *params;
    const EncoderTrace& en = tr.encoder;
    for_each_chunk(tr.chunks.size(), [&](size_t i) {
      backward_chunk(tr, tr.chunks[i], advantages, K, entropy_weight);
    });

    // Sum the chunks' results, always in chunk order.
    Gradients out;
    for (const torch::Tensor& t : p.list()) out.grads.push_back(torch::zeros_like(t));
    std::vector<float> denc(static_cast<size_t>(G) * H, 0.0f);
    std::vector<float> dkeys(static_cast<size_t>(G) * H, 0.0f);
    std::vector<float> dh_final(H, 0.0f);
    std::vector<float> dce(H, 0.0f);  // becomes the encoder's running d cell
    double log_prob_term = 0;
    double entropy_sum = 0;
    auto add = [](std::vector<float>& to, const std::vector<float>& from) {
      for (size_t i = 0; i < to.size(); ++i) to[i] += from[i];
    };
    for (const ChunkTrace& ch : tr.chunks) {
      for (size_t i = 0; i < out.grads.size(); ++i) {
        float* g = ptr(out.grads[i]);
        for (size_t j = 0; j < ch.grads[i].size(); ++j) g[j] += ch.grads[i][j];
      }
      add(denc, ch.denc);
      add(dkeys, ch.dkeys);
      add(dh_final, ch.dh_final);
      add(dce, ch.dc_final);
      log_prob_term += ch.log_prob_term;
      entropy_sum += ch.entropy_sum;
    }
    out.entropy = entropy_sum / (static_cast<double>(G) * K);
    double rows = 0;
    for (const ChunkTrace& ch : tr.chunks) rows += ch.step_begin[G];
    out.decoder_rows_fraction = rows / (static_cast<double>(G) * K);
    out.loss = -log_prob_term / K - entropy_weight * entropy_sum / K;
    float* g_w_in = ptr(out.grads[0]);
    float* g_b_in = ptr(out.grads[1]);
    float* g_we_ih = ptr(out.grads[2]);
    float* g_we_hh = ptr(out.grads[3]);
    float* g_be = ptr(out.grads[4]);
    float* g_w_a = ptr(out.grads[9]);

    // Attention keys = enc W_a^T.
    gemm(true, false, H, H, G, 1, dkeys.data(), H, en.enc.data(), H, 0, g_w_a, H);
    gemm(false, false, G, H, H, 1, dkeys.data(), H, ptr(p.w_a), H, 1, denc.data(), H);
    for (int j = 0; j < H; ++j) denc[(G - 1) * H + j] += dh_final[j];

    // Encoder LSTM, backwards in time (batch 1).
    std::vector<float> dze(static_cast<size_t>(G) * 4 * H);
    std::vector<float> dhe(H, 0.0f);
    for (int t = G - 1; t >= 0; --t) {
      const float* z = &en.Ge[static_cast<size_t>(t) * 4 * H];
      const float* tc = &en.TCe[t * H];
      float* dzr = &dze[static_cast<size_t>(t) * 4 * H];
      lstm_step_backward(z, tc, t > 0 ? &en.Ce[(t - 1) * H] : nullptr, &denc[t * H], dhe.data(),
                         dce.data(), dzr, H);
      gemm(false, false, 1, H, 4 * H, 1, dzr, 4 * H, ptr(p.we_hh), H, 0, dhe.data(), H);
    }
    if (G > 1) {
      gemm(true, false, 4 * H, H, G - 1, 1, &dze[4 * H], 4 * H, en.enc.data(), H, 0, g_we_hh, H);
    }
    for (int t = 0; t < G; ++t) {
      for (int j = 0; j < 4 * H; ++j) g_be[j] += dze[static_cast<size_t>(t) * 4 * H + j];
    }
    gemm(true, false, 4 * H, H, G, 1, dze.data(), 4 * H, en.X.data(), H, 0, g_we_ih, H);
    std::vector<float> dx(static_cast<size_t>(G) * H);
    gemm(false, false, G, H, 4 * H, 1, dze.data(), 4 * H, ptr(p.we_ih), H, 0, dx.data(), H);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] *= 1.0f - en.X[i] * en.X[i];
    gemm(true, false, H, F, G, 1, dx.data(), H, features.data(), F, 0, g_w_in, F);
    for (int t = 0; t < G; ++t) {
      for (int j = 0; j < H; ++j) g_b_in[j] += dx[t * H + j];
    }
    return out;
  }

  // ---- reference engine (autograd, teacher forcing) ----

  torch::Tensor reference_loss(std::span<const int32_t> actions, std::span<const double> advantages,
                               double entropy_weight) {
    const int G = this->G(), H = this->H(), D = this->D();
    const int K = static_cast<int>(advantages.size());
    const ParamsImpl& p = *params;
    torch::Tensor feats = torch::from_blob(features.data(), {G, F()}, torch::kFloat32).clone();
    torch::Tensor m = torch::from_blob(mask.data(), {G, D}, torch::kFloat32).clone();
    torch::Tensor chosen = torch::empty({K, G}, torch::kInt64);
    for (size_t i = 0; i < actions.size(); ++i) chosen.data_ptr<int64_t>()[i] = actions[i];
    torch::Tensor adv = torch::empty({K}, torch::kFloat32);
    for (int k = 0; k < K; ++k) adv.data_ptr<float>()[k] = static_cast<float>(advantages[k]);

    auto cell = [H](const torch::Tensor& z, const torch::Tensor& c) {
      std::vector<torch::Tensor> q = z.chunk(4, 1);
      torch::Tensor c2 = torch::sigmoid(q[1]) * c + torch::sigmoid(q[0]) * torch::tanh(q[2]);
      torch::Tensor h2 = torch::sigmoid(q[3]) * torch::tanh(c2);
      (void)H;
      return std::make_pair(h2, c2);
    };
    torch::Tensor x = torch::tanh(torch::matmul(feats, p.w_in.t()) + p.b_in);
    torch::Tensor zx = torch::matmul(x, p.we_ih.t()) + p.be;
    torch::Tensor h = torch::zeros({1, H});
    torch::Tensor c = torch::zeros({1, H});
    std::vector<torch::Tensor> enc_rows;
    for (int t = 0; t < G; ++t) {
      std::tie(h, c) = cell(zx[t].unsqueeze(0) + torch::matmul(h, p.we_hh.t()), c);
      enc_rows.push_back(h);
    }
    torch::Tensor enc = torch::cat(enc_rows, 0);
    torch::Tensor keys = torch::matmul(enc, p.w_a.t());
    torch::Tensor proj = torch::matmul(p.emb, p.wd_ih.t()) + p.bd;
    torch::Tensor hd = h.expand({K, H});
    torch::Tensor cd = c.expand({K, H});
    torch::Tensor prev = torch::full({K}, D, torch::kInt64);
    std::vector<torch::Tensor> dec_rows;
    for (int t = 0; t < G; ++t) {
      std::tie(hd, cd) = cell(proj.index_select(0, prev) + torch::matmul(hd, p.wd_hh.t()), cd);
      dec_rows.push_back(hd);
      prev = chosen.select(1, t);
    }
    torch::Tensor dec = torch::stack(dec_rows, 1);  // K x G x H
    torch::Tensor attn = torch::softmax(torch::matmul(dec, keys.t()), -1);
    torch::Tensor ctx = torch::matmul(attn, enc);
    torch::Tensor u = torch::tanh(torch::matmul(torch::cat({dec, ctx}, -1), p.w_c.t()) + p.b_c);
    torch::Tensor logits = torch::matmul(u, p.w_o.t()) + p.b_o + m;
    torch::Tensor log_probs = torch::log_softmax(logits, -1);
    torch::Tensor seq = log_probs.gather(2, chosen.unsqueeze(2)).squeeze(2).sum(1);
    torch::Tensor probs = log_probs.exp();
    torch::Tensor entropy =
        -torch::where(probs > 0, probs * log_probs, torch::zeros_like(probs)).sum(2).sum(1).mean();
    return -(adv * seq).mean() - entropy_weight * entropy;
  }
};

}  // namespace

TorchPolicy::TorchPolicy(const PolicyConfig& config, std::span<const float> features,
                         std::span<const uint8_t> allowed)
    : impl_(std::make_unique<Impl>()) {
  configure_threads_once();
  DPLACE_CHECK(config.num_groups > 0 && config.num_devices > 0 && config.feature_dim > 0 &&
               config.hidden > 0 && config.device_embedding > 0 && config.chunk > 0);
  DPLACE_CHECK(features.size() == static_cast<size_t>(config.num_groups) * config.feature_dim);
  DPLACE_CHECK(allowed.size() == static_cast<size_t>(config.num_groups) * config.num_devices);
  impl_->config = config;
  reinitialize(config.seed);
  impl_->features.assign(features.begin(), features.end());
  impl_->mask.resize(allowed.size());
  for (size_t i = 0; i < allowed.size(); ++i) impl_->mask[i] = allowed[i] ? 0.0f : kMaskedLogit;
}

void TorchPolicy::use_parallel_for(ParallelFor run) { impl_->parallel_for = std::move(run); }

void TorchPolicy::set_deadline(std::chrono::steady_clock::time_point deadline) {
  impl_->deadline = deadline;
}

void TorchPolicy::reinitialize(uint64_t seed) {
  {
    std::lock_guard<std::mutex> lock(init_mutex());
    torch::manual_seed(seed);
    impl_->params = Params(impl_->config);
  }
  impl_->optimizer = std::make_unique<torch::optim::Adam>(
      impl_->params->parameters(), torch::optim::AdamOptions(impl_->config.learning_rate));
  ++impl_->version;
  impl_->trace.valid = false;
}

void TorchPolicy::sample(int batch, std::span<const double> uniforms, std::vector<int32_t>& actions,
                         std::span<const int32_t> forced) {
  const size_t G = static_cast<size_t>(impl_->config.num_groups);
  DPLACE_CHECK(batch > 0 && uniforms.size() == static_cast<size_t>(batch) * G &&
               forced.size() % G == 0);
  impl_->decode(impl_->trace, DecodeMode::kSample, batch, uniforms.data(),
                static_cast<int>(forced.size() / G), forced.data());
  actions = impl_->trace.actions;
}

std::vector<int32_t> TorchPolicy::greedy() {
  Trace tr;
  impl_->decode(tr, DecodeMode::kGreedy, 1, nullptr, 0, nullptr);
  return tr.actions;
}

UpdateStats TorchPolicy::update(std::span<const int32_t> actions,
                                std::span<const double> advantages, double entropy_weight) {
  const int batch = static_cast<int>(advantages.size());
  DPLACE_CHECK(batch > 0 &&
               actions.size() == static_cast<size_t>(batch) * impl_->config.num_groups);
  Trace& tr = impl_->trace;
  const bool reusable = tr.valid && tr.version == impl_->version && tr.batch == batch &&
                        std::equal(actions.begin(), actions.end(), tr.actions.begin());
  if (!reusable) {
    impl_->decode(tr, DecodeMode::kSample, 0, nullptr, batch, actions.data());
  }
  Impl::Gradients g = impl_->backward(tr, advantages, entropy_weight);
  double norm_sq = 0;
  for (const torch::Tensor& t : g.grads) norm_sq += t.square().sum().item<double>();
  const double norm = std::sqrt(norm_sq);
  const double clip = impl_->config.grad_clip;
  const double scale = clip > 0 && norm > clip ? clip / norm : 1.0;
  std::vector<torch::Tensor> params = impl_->params->list();
  for (size_t i = 0; i < params.size(); ++i) {
    if (scale != 1.0) g.grads[i].mul_(scale);
    params[i].mutable_grad() = g.grads[i];
  }
  impl_->optimizer->step();
  ++impl_->version;
  tr.valid = false;
  return {.loss = g.loss,
          .entropy = g.entropy,
          .grad_norm = norm,
          .decoder_rows_fraction = g.decoder_rows_fraction};
}

double TorchPolicy::check_gradients(std::span<const int32_t> actions,
                                    std::span<const double> advantages, double entropy_weight) {
  const int batch = static_cast<int>(advantages.size());
  Trace tr;
  impl_->decode(tr, DecodeMode::kSample, 0, nullptr, batch, actions.data());
  Impl::Gradients fast = impl_->backward(tr, advantages, entropy_weight);
  std::vector<torch::Tensor> params = impl_->params->list();
  for (torch::Tensor& p : params) p.mutable_grad() = torch::Tensor();
  torch::Tensor loss = impl_->reference_loss(actions, advantages, entropy_weight);
  loss.backward();
  double max_diff = 0;
  double max_ref = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor ref = params[i].grad();
    max_diff = std::max(max_diff, (fast.grads[i] - ref).abs().max().item<double>());
    max_ref = std::max(max_ref, ref.abs().max().item<double>());
    params[i].mutable_grad() = torch::Tensor();
  }
  DPLACE_CHECK(std::abs(loss.item<double>() - fast.loss) <=
               1e-3 * std::max(1.0, std::abs(fast.loss)))
      << "loss differs: reference " << loss.item<double>() << ", fast " << fast.loss;
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

void TorchPolicy::save(const std::string& path, const TrainerState& state) const {
  torch::serialize::OutputArchive root;
  torch::serialize::OutputArchive net_archive;
  torch::serialize::OutputArchive optimizer_archive;
  impl_->params->save(net_archive);
  impl_->optimizer->save(optimizer_archive);
  root.write("net", net_archive);
  root.write("optimizer", optimizer_archive);
  const PolicyConfig& c = impl_->config;
  root.write("config",
             torch::tensor(std::vector<int64_t>{c.num_groups, c.num_devices, c.feature_dim,
                                                c.hidden, c.device_embedding},
                           torch::kInt64));
  int64_t fingerprint;
  std::memcpy(&fingerprint, &state.fingerprint, sizeof fingerprint);
  root.write(
      "state_ints",
      torch::tensor(std::vector<int64_t>{state.updates, state.samples, state.has_baseline ? 1 : 0,
                                         fingerprint, state.restarts, state.samples_at_restart,
                                         state.stalled_updates, state.level, state.refinements},
                    torch::kInt64));
  root.write("state_doubles",
             torch::tensor(std::vector<double>{state.baseline, state.best_step_time_s,
                                               state.elapsed_s, state.oom_step_time_s},
                           torch::kFloat64));
  std::vector<int64_t> best(state.best_actions.begin(), state.best_actions.end());
  root.write("best_actions", torch::tensor(best, torch::kInt64));
  try {
    write_checkpoint_file(path, root);
  } catch (const c10::Error& e) {
    throw ConfigError(
        fmt::format("checkpoint '{}': cannot write: {}", path, e.what_without_backtrace()));
  }
}

TrainerState TorchPolicy::load(const std::string& path) {
  const TrainerState state = with_checkpoint_read_errors(path, [&] {
    torch::serialize::InputArchive root;
    read_checkpoint_file(path, root);
    torch::Tensor config;
    root.read("config", config);
    const PolicyConfig& c = impl_->config;
    const std::vector<int64_t> expected{c.num_groups, c.num_devices, c.feature_dim, c.hidden,
                                        c.device_embedding};
    if (config.numel() != static_cast<int64_t>(expected.size()) ||
        !torch::equal(config, torch::tensor(expected, torch::kInt64))) {
      throw ConfigError(fmt::format(
          "checkpoint '{}': made for another graph or policy size (groups, devices, features, "
          "hidden or embedding differ)",
          path));
    }
    torch::serialize::InputArchive net_archive;
    torch::serialize::InputArchive optimizer_archive;
    root.read("net", net_archive);
    root.read("optimizer", optimizer_archive);
    impl_->params->load(net_archive);
    impl_->optimizer->load(optimizer_archive);
    // A damaged file may still parse; a non-finite weight would make every probability NaN.
    for (const auto& named : impl_->params->named_parameters()) {
      if (!torch::isfinite(named.value()).all().item<bool>()) {
        throw ConfigError(
            fmt::format("checkpoint '{}': damaged: weight '{}' is not finite", path, named.key()));
      }
    }
    for (const auto& [key, param_state] : impl_->optimizer->state()) {
      const auto& adam = static_cast<const torch::optim::AdamParamState&>(*param_state);
      if (!torch::isfinite(adam.exp_avg()).all().item<bool>() ||
          !torch::isfinite(adam.exp_avg_sq()).all().item<bool>() ||
          (adam.exp_avg_sq() < 0).any().item<bool>() || adam.step() < 0) {
        throw ConfigError(fmt::format(
            "checkpoint '{}': damaged: optimizer state holds a non-finite or negative value",
            path));
      }
    }
    return read_state(root, path);
  });
  ++impl_->version;
  impl_->trace.valid = false;
  return state;
}

namespace {

std::unique_ptr<Policy> make_torch_policy(const PolicyConfig& config,
                                          std::span<const float> features,
                                          std::span<const uint8_t> allowed) {
  return std::make_unique<TorchPolicy>(config, features, allowed);
}

const TorchModuleApi kTorchModuleApi{.abi = kTorchModuleAbi,
                                     .policy_config_bytes = sizeof(PolicyConfig),
                                     .trainer_state_bytes = sizeof(TrainerState),
                                     .update_stats_bytes = sizeof(UpdateStats),
                                     .make_policy = make_torch_policy,
                                     .read_trainer_state = read_trainer_state_file};

}  // namespace
}  // namespace dplace::rl

// The module is compiled with hidden visibility; this is its one exported symbol.
extern "C" __attribute__((visibility("default"))) const dplace::rl::TorchModuleApi*
dplace_rl_torch_module() {
  return &dplace::rl::kTorchModuleApi;
}
