// Placer-specific options: PlaceRequest::params (the CLI's `--param key=value`) read by one placer.
//
// A placer lists the keys it understands when it builds a PlacerParams; any other key is a
// ConfigError naming the placer and the key, so a typo never silently falls back to a default.
// Values are parsed on access; a malformed or out-of-range value is a ConfigError naming the
// placer, key and value.
//
// Thread safety: a PlacerParams is a read-only view; safe to share after construction.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dplace {

class PlacerParams {
 public:
  // REQUIRES: `params` outlives this object. Throws ConfigError
  //   "placer 'NAME': unknown --param 'KEY' (known: a, b)" for a key not in `known`.
  PlacerParams(std::string placer_name, const std::map<std::string, std::string>& params,
               std::vector<std::string> known);

  bool has(const std::string& key) const { return params_.count(key) != 0; }
  // The value in [min, max], or `fallback` when absent.
  double get_double(const std::string& key, double fallback, double min, double max) const;
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min, int64_t max) const;
  // One of `choices`, or `fallback` when absent.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices) const;
  // A file path, or "" when absent. Throws ConfigError "placer 'NAME': --param KEY= needs a file
  // name" when given empty.
  std::string get_file(const std::string& key) const;

 private:
  std::string placer_;
  const std::map<std::string, std::string>& params_;
};

}  // namespace dplace
