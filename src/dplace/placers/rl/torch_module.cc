// Loads the rl placer's LibTorch module (see torch_module.h) and forwards policy.h's factories to
// it. No LibTorch here.
#include "dplace/placers/rl/torch_module.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "dplace/core/error.h"

namespace dplace::rl {
namespace {

constexpr const char* kModuleFile = "dplace_rl_torch.so";
constexpr const char* kModuleEnv = "DPLACE_RL_TORCH_MODULE";

// The files to try, in order (see torch_module.h).
std::vector<std::string> candidate_paths() {
  if (const char* path = std::getenv(kModuleEnv); path != nullptr && *path != '\0') return {path};
  std::vector<std::string> paths;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back((exe.parent_path() / kModuleFile).string());
#ifdef DPLACE_RL_TORCH_MODULE_BUILD_PATH
  if (paths.empty() || paths.front() != DPLACE_RL_TORCH_MODULE_BUILD_PATH) {
    paths.emplace_back(DPLACE_RL_TORCH_MODULE_BUILD_PATH);
  }
#endif
  return paths;
}

// The API of the module at `path`, or nullptr with `why` set.
const TorchModuleApi* try_load(const std::string& path, std::string& why) {
  // dlopen's own message for a missing file is long and repeats the path.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    why = "no such file";
    return nullptr;
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed
  if (handle == nullptr) {
    const char* error = dlerror();
    why = error != nullptr ? error : "dlopen failed";
    return nullptr;
  }
  using Entry = const TorchModuleApi* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "dplace_rl_torch_module"));
  if (entry == nullptr) {
    why = "not a dplace rl module (no dplace_rl_torch_module symbol)";
    return nullptr;
  }
  const TorchModuleApi* api = entry();
  if (api == nullptr || api->abi != kTorchModuleAbi ||
      api->policy_config_bytes != sizeof(PolicyConfig) ||
      api->trainer_state_bytes != sizeof(TrainerState) ||
      api->update_stats_bytes != sizeof(UpdateStats) || api->make_policy == nullptr ||
      api->read_trainer_state == nullptr) {
    why = "built from another version of dplace; rebuild it with this dplace";
    return nullptr;
  }
  return api;
}

// OpenBLAS reads OPENBLAS_NUM_THREADS when it is loaded, which loading the module may do, and the
// policy wants one BLAS thread (policy.h): the variable is 1 while the module loads, unless the
// user set it. Only then: the environment is inherited by measure-cmd, whose real step must run
// with the user's settings, not the policy's.
const TorchModuleApi* try_load_one_blas_thread(const std::string& path, std::string& why) {
  constexpr const char* kVariable = "OPENBLAS_NUM_THREADS";
  const bool user_set = std::getenv(kVariable) != nullptr;
  if (!user_set) setenv(kVariable, "1", /*overwrite=*/1);
  const TorchModuleApi* api = try_load(path, why);
  if (!user_set) unsetenv(kVariable);
  return api;
}

// Whether the loader's message says memory ran out (an address-space limit): "failed to map
// segment from shared object" (with no other reason: on a noexec mount it ends "Operation not
// permitted") or "Cannot allocate memory", but not glibc's "cannot allocate memory in static TLS
// block", which is no lack of memory.
bool out_of_memory(const std::string& why) {
  if (why.find("static TLS") != std::string::npos) return false;
  if (why.find("Cannot allocate memory") != std::string::npos) return true;
  return why.find("failed to map segment") != std::string::npos &&
         why.find("not permitted") == std::string::npos &&
         why.find("ermission denied") == std::string::npos;
}

const TorchModuleApi* load_or_explain(std::string& failure) {
  std::string tried;
  for (const std::string& path : candidate_paths()) {
    std::string why;
    if (const TorchModuleApi* api = try_load_one_blas_thread(path, why)) return api;
    if (out_of_memory(why)) {
      // Not a missing or wrong module: no hint about DPLACE_RL_TORCH_MODULE, and exit 3.
      throw std::system_error(
          std::make_error_code(std::errc::not_enough_memory),
          fmt::format("placer 'rl': out of host memory loading its LibTorch module {} ({})", path,
                      why));
    }
    tried += fmt::format("{}{}: {}", tried.empty() ? "" : "; ", path, why);
  }
  failure = fmt::format(
      "placer 'rl': cannot load its LibTorch module ({}); set {} to the path of {}, which the "
      "build writes next to the dplace binary",
      tried, kModuleEnv, kModuleFile);
  return nullptr;
}

}  // namespace

const TorchModuleApi& load_torch_module() {
  static std::mutex mutex;
  static const TorchModuleApi* api = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (api == nullptr) {
    std::string failure;
    api = load_or_explain(failure);
    if (api == nullptr) throw ConfigError(failure);
  }
  return *api;
}

std::unique_ptr<Policy> make_policy(const PolicyConfig& config, std::span<const float> features,
                                    std::span<const uint8_t> allowed) {
  return load_torch_module().make_policy(config, features, allowed);
}

TrainerState read_trainer_state(const std::string& path) {
  return load_torch_module().read_trainer_state(path);
}

}  // namespace dplace::rl
