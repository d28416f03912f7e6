// The learning curves of the learning placers (--param curve=FILE.csv): a CSV file, its header
// written when the run starts and rows appended as it goes (each opened, written and closed, so
// that an interrupted run leaves every row so far). A write error is a ConfigError
// "--param curve=PATH: cannot write the file: REASON".
//
// Thread safety: functions of one path are called by one thread at a time.
#pragma once

#include <string>
#include <string_view>

namespace dplace {

// Throws the ConfigError above, with strerror(errno) as the reason ("write failed" when errno is
// 0).
[[noreturn]] void throw_cannot_write_curve(const std::string& path);

// Creates or truncates the file and writes `header` and a newline.
void write_curve_header(const std::string& path, std::string_view header);

// Appends `row` and a newline.
void append_curve_row(const std::string& path, std::string_view row);

}  // namespace dplace
