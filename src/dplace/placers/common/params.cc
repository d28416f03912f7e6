#include "dplace/placers/common/params.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "dplace/core/error.h"

namespace dplace {
namespace {

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out.empty() ? "none" : out;
}

}  // namespace

PlacerParams::PlacerParams(std::string placer_name,
                           const std::map<std::string, std::string>& params,
                           std::vector<std::string> known)
    : placer_(std::move(placer_name)), params_(params) {
  std::sort(known.begin(), known.end());
  for (const auto& [key, value] : params_) {
    if (!std::binary_search(known.begin(), known.end(), key)) {
      throw ConfigError(
          fmt::format("placer '{}': unknown --param '{}' (known: {})", placer_, key, join(known)));
    }
  }
}

double PlacerParams::get_double(const std::string& key, double fallback, double min,
                                double max) const {
  auto it = params_.find(key);
  if (it == params_.end()) return fallback;
  const std::string& text = it->second;
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    throw ConfigError(
        fmt::format("placer '{}': --param {}='{}' is not a number", placer_, key, text));
  }
  if (value < min || value > max) {
    throw ConfigError(fmt::format("placer '{}': --param {}={} is outside [{}, {}]", placer_, key,
                                  text, min, max));
  }
  return value;
}

int64_t PlacerParams::get_int(const std::string& key, int64_t fallback, int64_t min,
                              int64_t max) const {
  auto it = params_.find(key);
  if (it == params_.end()) return fallback;
  const std::string& text = it->second;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw ConfigError(
        fmt::format("placer '{}': --param {}='{}' is not an integer", placer_, key, text));
  }
  if (value < min || value > max) {
    throw ConfigError(fmt::format("placer '{}': --param {}={} is outside [{}, {}]", placer_, key,
                                  text, min, max));
  }
  return value;
}

std::string PlacerParams::get_choice(const std::string& key, const std::string& fallback,
                                     const std::vector<std::string>& choices) const {
  auto it = params_.find(key);
  if (it == params_.end()) return fallback;
  if (std::find(choices.begin(), choices.end(), it->second) == choices.end()) {
    throw ConfigError(fmt::format("placer '{}': --param {}='{}' is not one of: {}", placer_, key,
                                  it->second, join(choices)));
  }
  return it->second;
}

std::string PlacerParams::get_file(const std::string& key) const {
  auto it = params_.find(key);
  if (it == params_.end()) return "";
  if (it->second.empty()) {
    throw ConfigError(fmt::format("placer '{}': --param {}= needs a file name", placer_, key));
  }
  return it->second;
}

}  // namespace dplace
