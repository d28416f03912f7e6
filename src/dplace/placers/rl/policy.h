// The placement policy of Mirhoseini et al. (ICML 2017): a sequence-to-sequence network that reads
// one feature vector per group (in topological order) and emits one device per group.
//
//   encoder:   x_g = tanh(W_in f_g + b_in), then an LSTM over the groups: enc_g, final (h, c);
//   decoder:   an LSTM whose input at step t is the learned embedding of the device chosen at step
//              t-1 (a start embedding at t = 0); initial state = the encoder's final state;
//   attention: content-based (Luong "general"): score(t, g) = dec_t . (W_a enc_g), softmax over g,
//              context_t = sum_g weight * enc_g; u_t = tanh(W_c [dec_t; context_t] + b_c);
//   output:    logits_t = W_o u_t + b_o over the devices, devices the group may not use masked out.
// The device embedding is fed back to the decoder, the attention context is not (no "input
// feeding"), as in the paper.
//
// Two engines compute the same function with the same parameters:
//  * the fast engine (used for training): forward step by step over raw buffers with BLAS sgemm
//    (the BLAS LibTorch itself uses) and LibTorch's vectorised sigmoid/tanh/softmax, keeping every
//    activation of the sampled batch; the REINFORCE gradient is then back-propagated by hand
//    (backpropagation through time), with the non-recurrent parts of the backward pass done as a
//    few large matrix products over all steps at once. No autograd graph is built.
//  * the reference engine: the same network written with LibTorch autograd operations and
//    teacher forcing; check_gradients() compares the two (tests).
// Parameters, initialisation, the Adam optimizer and checkpoints are LibTorch's.
//
// Where LibTorch lives: the implementation (policy.cc, the only translation unit that includes
// Torch) is built as a separate loadable module, dplace_rl_torch.so, which make_policy() and
// read_trainer_state() load on first use (torch_module.h). Linking LibTorch into the dplace binary
// made every command, `dplace --version` included, spend about a second loading Debian's LibTorch
// and its ~300 shared libraries; now only a run of the rl placer pays it. This header is plain C++.
// The first policy built tells OpenBLAS and LibTorch to use one thread each: parallelism comes
// from the worker threads, which evaluate samples concurrently and, between evaluations, decode and
// back-propagate chunks of samples concurrently (use_parallel_for()).
//
// Thread safety: a Policy is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dplace/core/thread_pool.h"

namespace dplace::rl {

struct PolicyConfig {
  int num_groups = 0;            // sequence length. REQUIRES: > 0
  int num_devices = 0;           // REQUIRES: > 0
  int feature_dim = 0;           // REQUIRES: > 0
  int hidden = 64;               // LSTM and attention width. Default: 64.
  int device_embedding = 16;     // Default: 16.
  double learning_rate = 0.001;  // Adam. Default: 0.001.
  double grad_clip = 1.0;        // max global gradient norm; 0: off. Default: 1.0.
  uint64_t seed = 1;             // initial weights. Default: 1.
  // Samples per chunk: a batch of n samples (forced ones included) is decoded and
  // back-propagated in max(1, floor(n / chunk)) chunks of this many samples, the last taking the
  // remainder, which run in parallel through use_parallel_for(). Samples of a chunk that
  // share a prefix share its computation. The chunking, not the number of threads, fixes the
  // arithmetic, so results are the same for every thread count. Default: 8.
  int chunk = 8;
  // The backward pass's products over all of a chunk's decoder rows are cut into blocks of rows of
  // about this many multiply-adds, with a deadline check between blocks (see set_deadline()). At
  // the default sizes every product is one block. Default: 2^32 (a tenth of a second or so).
  int64_t block_multiply_adds = int64_t{1} << 32;
};

// Bytes the fast engine holds at most for one pass over `sequences` sequences (sampled and forced)
// of config.num_groups decisions: one decoder row per sequence and group before prefix sharing,
// each with its activations (10 H + G + D floats) and the buffers of its backward pass (9 H + G +
// D floats) and its row index. The weights, their gradients and the encoder (G rows) are left out:
// at the sizes where this matters they are below 1% of it.
inline int64_t policy_pass_bytes(const PolicyConfig& config, int sequences) {
  const int64_t H = config.hidden, G = config.num_groups, D = config.num_devices;
  const int64_t per_row = 4 * (19 * H + 2 * G + 2 * D) + 4;
  return static_cast<int64_t>(sequences) * G * per_row;
}

// Thrown by sample(), update() and greedy() when the deadline given to set_deadline() passes during
// the pass. The pass is abandoned where it stands: the weights and the optimizer state are those
// from before it. An abandoned sample() leaves no pass to reuse (the next update() recomputes it);
// an abandoned update() leaves the sampled pass, which the next update() of the same actions
// reuses.
class PolicyDeadlinePassed : public std::exception {
 public:
  const char* what() const noexcept override { return "rl: the policy's deadline passed"; }
};

// Plain state saved with the network in a checkpoint.
struct TrainerState {
  int64_t updates = 0;
  int64_t samples = 0;
  double baseline = 0;
  bool has_baseline = false;
  double best_step_time_s = 0;  // penalised step time of best_actions
  // Step time charged to an OOM placement (0: not set yet). Without oom-time it rises to twice
  // the slowest fitting step time measured, so every fitting placement beats every OOM one.
  double oom_step_time_s = 0;
  std::vector<int32_t> best_actions;  // one device index per group; empty: none yet
  double elapsed_s = 0;               // wall time spent before this run
  uint64_t fingerprint = 0;           // identifies graph, grouping and configuration
  int64_t restarts = 0;               // policy restarts so far (see RlOptions::restart_patience)
  int64_t samples_at_restart = 0;     // `samples` when the current policy started
  int64_t stalled_updates = 0;        // consecutive converged updates without a new best
  int64_t level = 0;                  // grouping level the policy places (0: coarsest)
  int64_t refinements = 0;            // moves to a finer level so far
};

// The TrainerState saved in a checkpoint written by Policy::save, without building a policy (the
// policy's size depends on state.level). Throws ConfigError naming the path when it cannot be read,
// or naming the LibTorch module when that cannot be loaded.
TrainerState read_trainer_state(const std::string& path);

struct UpdateStats {
  double loss = 0;
  double entropy = 0;  // mean per-group entropy (nats) of the batch's distributions
  double grad_norm = 0;
  // Decoder rows computed for the batch over samples x groups: below 1 when samples share
  // prefixes (see policy.cc), which is how much of the decoder's work prefix sharing kept.
  double decoder_rows_fraction = 1;
};

// Runs fn(i) for every i in [0, n) and returns when all calls have returned; calls may run
// concurrently. If a call throws, the exception is rethrown after the loop.
using ParallelFor = std::function<void(size_t n, const std::function<void(size_t i)>& fn)>;

// A ParallelFor on the pool's workers; the pool must outlive its use.
inline ParallelFor parallel_for_on(ThreadPool& pool) {
  return [&pool](size_t n, const std::function<void(size_t)>& fn) {
    pool.parallel_for(n, [&fn](size_t i, size_t /*worker*/) { fn(i); });
  };
}

class Policy {
 public:
  virtual ~Policy() = default;

  // Samples `batch` placements in one batched forward pass. uniforms: batch x num_groups values in
  // [0, 1) (drawn by the caller's seeded Rng), used by inverse-CDF sampling so results depend only
  // on them and the weights. actions (out): batch x num_groups device indices, sample-major.
  // forced: whole placements (a multiple of num_groups values) appended after the sampled ones and
  // decoded in the same pass, so that update() on all rows reuses it; actions then holds them too.
  virtual void sample(int batch, std::span<const double> uniforms, std::vector<int32_t>& actions,
                      std::span<const int32_t> forced) = 0;
  void sample(int batch, std::span<const double> uniforms, std::vector<int32_t>& actions) {
    sample(batch, uniforms, actions, {});
  }
  // The most likely device of each group, chosen step by step (greedy decoding).
  virtual std::vector<int32_t> greedy() = 0;
  // Runs the chunks of sample(), update() and greedy() through `run` (empty: on the calling
  // thread). Whatever `run` uses must outlive its use here.
  virtual void use_parallel_for(ParallelFor run) = 0;
  // sample(), update() and greedy() check the clock at every encoder and decoder step and between
  // the blocks of the backward pass's large products (PolicyConfig::block_multiply_adds), and throw
  // PolicyDeadlinePassed once `deadline` has passed. Default: none.
  virtual void set_deadline(std::chrono::steady_clock::time_point deadline) = 0;
  // Fresh weights drawn with `seed` and a fresh Adam state: the policy starts over.
  virtual void reinitialize(uint64_t seed) = 0;

  // One REINFORCE step with Adam on
  //   loss = -mean_k(advantage_k * log p(actions_k)) - entropy_weight * mean_k(entropy_k),
  // where entropy_k is the sum over groups of the entropy of each group's device distribution
  // (so the bonus per decision is comparable to the advantage per decision). actions: batch x
  // num_groups; when they are the batch of the last sample() and the weights have not changed
  // since, its activations are reused, otherwise the forward pass is recomputed with these actions.
  virtual UpdateStats update(std::span<const int32_t> actions, std::span<const double> advantages,
                             double entropy_weight) = 0;

  // For tests: the largest |fast - reference| over all gradient entries of the loss above, divided
  // by the largest |reference| entry. Does not change the weights.
  virtual double check_gradients(std::span<const int32_t> actions,
                                 std::span<const double> advantages, double entropy_weight) = 0;

  // Writes weights, optimizer state and `state` to one file (Torch archive).
  virtual void save(const std::string& path, const TrainerState& state) const = 0;
  // Reads a file written by save() into this policy (weights and optimizer state). Throws
  // ConfigError naming the path when it cannot be read or was made for another configuration.
  virtual TrainerState load(const std::string& path) = 0;
};

// A policy with fresh weights drawn from config.seed. features: num_groups x feature_dim,
// row-major. allowed: num_groups x num_devices, row-major, nonzero where the group may run on the
// device (each row has at least one). Loads the LibTorch module on first use; throws ConfigError
// naming the module when it cannot be loaded.
std::unique_ptr<Policy> make_policy(const PolicyConfig& config, std::span<const float> features,
                                    std::span<const uint8_t> allowed);

}  // namespace dplace::rl
