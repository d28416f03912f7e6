// Helpers for reading JSON input files with one-line error messages that name the file, the
// object (op, device, ...) and the field. Every reader in io/ and cluster/ uses these, so all
// format errors look alike:  "<file>: op 'mm': field 'flops': expected a non-negative number".
//
// Thread safety: stateless functions.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dplace {

using Json = nlohmann::json;

// Where a value sits: the source (file path or preset name) and the enclosing object, e.g.
// {"graph.json", "op 'mm'"}. `where` may be empty for top-level fields.
struct JsonContext {
  std::string source;
  std::string where;

  JsonContext at(std::string where_inner) const;
  // Throws FormatError "<source>: <where>: field '<field>': <problem>".
  [[noreturn]] void fail(std::string_view field, std::string_view problem) const;
  // Throws FormatError "<source>: <where>: <problem>".
  [[noreturn]] void fail(std::string_view problem) const;
};

// Reads and parses a JSON file. Throws FormatError naming the path for a missing or unreadable
// file, and the byte offset for a syntax error or truncation.
Json read_json_file(const std::string& path);
// Shrinks one element of a long list as soon as it is parsed (see read_json_list_file).
using ListElementReducer = std::function<void(Json& element)>;
// read_json_file for a file that is one long list, such as a trace of a million events: `reduce`
// sees each object or array element of the top-level array, or of the array under `list_key` of
// a top-level object, as soon as it is parsed, and may shrink it (to null, or to the fields the
// reader needs), so that the document never holds what the reader drops. Scalar elements (null
// included) are not given to `reduce`. Indices stay as in the file. Same errors as
// read_json_file.
Json read_json_list_file(const std::string& path, std::string_view list_key,
                         const ListElementReducer& reduce);
// Parses JSON text; `source` names it in errors.
Json parse_json_text(std::string_view text, const std::string& source);

// REQUIRES: obj is an object (checked with `ctx.fail` otherwise).
void require_object(const Json& value, const JsonContext& ctx);
bool has_field(const Json& obj, std::string_view field);

// Field accessors. The `_or` forms return `fallback` when the field is absent (null counts as
// absent); the others throw when absent. All throw when the field has the wrong type or range.
std::string get_string(const Json& obj, std::string_view field, const JsonContext& ctx);
std::string get_string_or(const Json& obj, std::string_view field, const JsonContext& ctx,
                          std::string fallback);
double get_number(const Json& obj, std::string_view field, const JsonContext& ctx);
// Finite and >= 0.
double get_nonnegative(const Json& obj, std::string_view field, const JsonContext& ctx);
double get_nonnegative_or(const Json& obj, std::string_view field, const JsonContext& ctx,
                          double fallback);
// Finite and > 0.
double get_positive(const Json& obj, std::string_view field, const JsonContext& ctx);
// A byte count: a non-negative integer (written as an integer or as a float like 1.2e10).
int64_t get_bytes(const Json& obj, std::string_view field, const JsonContext& ctx);
int64_t get_bytes_or(const Json& obj, std::string_view field, const JsonContext& ctx,
                     int64_t fallback);
bool get_bool_or(const Json& obj, std::string_view field, const JsonContext& ctx, bool fallback);
// Converts a JSON number that must be a non-negative byte count; `field` is only for the message.
int64_t as_bytes(const Json& value, std::string_view field, const JsonContext& ctx);

}  // namespace dplace
