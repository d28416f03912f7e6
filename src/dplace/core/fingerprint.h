// 64-bit FNV-1a hashing for identity checks (is this checkpoint for this run? is this file
// intact?), not for security: a deliberately forged input can match.
//
// Thread safety: a Fingerprint is a plain value.
#pragma once

#include <cstdint>
#include <string_view>

namespace dplace {

class Fingerprint {
 public:
  // The 8 bytes of v, least significant first.
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) add_byte(static_cast<unsigned char>(v >> (8 * i)));
  }
  // The length, then the bytes: "ab" + "c" differs from "a" + "bc".
  void add(std::string_view s) {
    add(static_cast<uint64_t>(s.size()));
    add_bytes(s);
  }
  // The bytes alone (a plain FNV-1a of one buffer).
  void add_bytes(std::string_view bytes) {
    for (char c : bytes) add_byte(static_cast<unsigned char>(c));
  }
  uint64_t value() const { return hash_; }

 private:
  void add_byte(unsigned char b) {
    hash_ ^= b;
    hash_ *= 0x100000001b3ULL;
  }

  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace dplace
