#include "dplace/core/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace dplace {

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return "inf";
  if (seconds >= 1) return fmt::format("{:.4g} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.4g} ms", seconds * 1e3);
  return fmt::format("{:.4g} us", seconds * 1e6);
}

namespace {

// The length of the well-formed UTF-8 sequence starting at text[i], or 0 when there is none.
size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return length;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

std::string escape_invalid_utf8(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

namespace {

bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

}  // namespace

bool has_control_character(std::string_view text) {
  return std::any_of(text.begin(), text.end(), is_control);
}

std::string escape_control_characters(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (is_control(c)) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

std::string one_line(std::string_view text) {
  std::string spaced(text);
  for (char& c : spaced) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  std::string out = escape_control_characters(spaced);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  // A message may quote its input: a 200-million-digit number in a cluster file made a 200 MB line.
  constexpr size_t kMaxShown = 2000;
  if (out.size() > kMaxShown) {
    size_t keep = kMaxShown;  // not inside a UTF-8 character
    while (keep > 0 && (static_cast<unsigned char>(out[keep]) & 0xC0) == 0x80) --keep;
    out = fmt::format("{}... ({} more bytes)", out.substr(0, keep), out.size() - keep);
  }
  return out;
}

}  // namespace dplace
