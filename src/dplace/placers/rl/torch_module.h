// The boundary between dplace and the rl placer's LibTorch module.
//
// The policy (policy.cc, the only translation unit that includes Torch) is built as a loadable
// module, dplace_rl_torch.so, instead of being linked into the dplace binary: Debian's LibTorch
// pulls in about 300 shared libraries (OpenCV, FFmpeg, GDAL, Qt, ...) whose loading and static
// initialisers cost about a second per process, which every command paid, `dplace --version` and
// `dplace info` included. Now only the first make_policy() or read_trainer_state() of a process
// (a run of the rl placer, or resuming one) loads it.
//
// The module exports one C symbol, dplace_rl_torch_module(), returning a TorchModuleApi. The
// loader (torch_module.cc, in the dplace binary) looks for the file in this order:
//   1. the path in the environment variable DPLACE_RL_TORCH_MODULE, when it is set (then only it);
//   2. dplace_rl_torch.so in the directory of the running executable (where the build puts it);
//   3. the path where this build wrote it (for executables outside that directory).
// and refuses a module whose TorchModuleApi was compiled from other declarations (abi and the
// sizes below), so a stale module from another build is an error, not undefined behaviour.
//
// Invariants: the module links its own copy of dplace_core (errors, checks) with every symbol but
// the entry point hidden; objects cross the boundary only as the types of policy.h and the
// standard library (the same compiler and libstdc++ build both sides). A ConfigError thrown in the
// module is caught by its type on this side (libstdc++ matches exception types by name).
// The module is never unloaded.
//
// Thread safety: load_torch_module() may be called from any thread; the first call loads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "dplace/placers/rl/policy.h"

namespace dplace::rl {

// Bump when TorchModuleApi or the declarations of policy.h change in a way the sizes below miss.
inline constexpr int kTorchModuleAbi = 2;

struct TorchModuleApi {
  int abi = 0;                     // kTorchModuleAbi of the module's build
  size_t policy_config_bytes = 0;  // sizeof(PolicyConfig) there
  size_t trainer_state_bytes = 0;  // sizeof(TrainerState) there
  size_t update_stats_bytes = 0;   // sizeof(UpdateStats) there
  std::unique_ptr<Policy> (*make_policy)(const PolicyConfig& config,
                                         std::span<const float> features,
                                         std::span<const uint8_t> allowed) = nullptr;
  TrainerState (*read_trainer_state)(const std::string& path) = nullptr;
};

// The module's API, loading it on first use. Throws ConfigError "placer 'rl': cannot load its
// LibTorch module ..." naming each file tried and why, when none can be loaded.
const TorchModuleApi& load_torch_module();

}  // namespace dplace::rl

// The module's entry point (defined in policy.cc).
extern "C" const dplace::rl::TorchModuleApi* dplace_rl_torch_module();
