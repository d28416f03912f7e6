// Human-readable durations for tables, notes and progress lines, UTF-8 checks for names that
// reach JSON output (nlohmann refuses to write invalid UTF-8), and diagnostics on stderr.
//
// Thread safety: pure functions; print_to_stderr writes each line with one fwrite, which stdio
// locks, so lines from several threads do not interleave.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

namespace dplace {

// Four significant digits in the largest unit that keeps the value >= 1 (down to microseconds):
// "1.234 s", "12.3 ms", "45.6 us"; "inf" for an infinite or NaN value.
std::string format_seconds(double seconds);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points > U+10FFFF).
bool is_valid_utf8(std::string_view text);
// `text` with every byte that is not part of a well-formed UTF-8 sequence written as \xNN.
std::string escape_invalid_utf8(std::string_view text);
// Whether `text` holds an ASCII control character (below 0x20, or 0x7f): names that the text
// output prints in headers and tables must not (a newline in a graph's name split its header).
bool has_control_character(std::string_view text);
// `text` with every ASCII control character written as \xNN (a newline as \x0a).
std::string escape_control_characters(std::string_view text);

// A diagnostic as one line of printable text: errors and warnings on stderr are one line each, but
// a library's message may carry newlines (e.g. LibTorch's) and a damaged file's names may carry any
// byte. Line breaks and tabs become spaces, other control characters \xNN, trailing spaces go; a
// line longer than 2,000 bytes is cut there (not inside a UTF-8 character) and says how much more
// there was.
std::string one_line(std::string_view text);

// A formatted diagnostic (error, warning, progress line) on standard error. A failed write is
// ignored: a diagnostic has nowhere else to go, and fmt::print's exception on a full or closed
// stderr ended the run (terminate, when a worker thread printed progress).
template <typename... Args>
void print_to_stderr(fmt::format_string<Args...> format, Args&&... args) {
  const std::string text = fmt::format(format, std::forward<Args>(args)...);
  static_cast<void>(std::fwrite(text.data(), 1, text.size(), stderr));
}

}  // namespace dplace
