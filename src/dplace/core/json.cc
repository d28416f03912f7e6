#include "dplace/core/json.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/files.h"

namespace dplace {

JsonContext JsonContext::at(std::string where_inner) const {
  JsonContext inner{source, where.empty() ? where_inner : where + ": " + where_inner};
  return inner;
}

void JsonContext::fail(std::string_view field, std::string_view problem) const {
  std::string message = source + ": ";
  if (!where.empty()) message += where + ": ";
  message += fmt::format("field '{}': {}", field, problem);
  throw FormatError(message);
}

void JsonContext::fail(std::string_view problem) const {
  std::string message = source + ": ";
  if (!where.empty()) message += where + ": ";
  message += problem;
  throw FormatError(message);
}

namespace {

// Deeper documents are refused before parsing: copying or printing a Json recurses once per level,
// so a file of a million nested brackets would overflow the stack.
constexpr int kMaxJsonDepth = 256;
// The most read from a device or a pipe: far above any cluster or placement file.
constexpr size_t kMaxStreamedJsonBytes = size_t{1} << 30;

void check_nesting_depth(std::string_view text, const std::string& source) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw FormatError(fmt::format("{}: invalid JSON at byte {}: nested deeper than {} levels",
                                      source, i + 1, kMaxJsonDepth));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

// Builds the document from nlohmann's SAX events and refuses an object naming the same key twice
// (nlohmann keeps the last value without a word, so a placement assigning an op twice, or a graph
// op with two "flops", was read as if the earlier entry were not there). Not nlohmann's parser
// callback: after every object it scans the enclosing container for discarded values, which made
// reading a list of n ops take n^2 steps (4 s for 100,000 ops).
class CheckedDomBuilder {
 public:
  CheckedDomBuilder(Json& root, const std::string& source) : root_(root), source_(source) {}
  // See read_json_list_file: `reduce` sees each container element of the list once it is parsed.
  CheckedDomBuilder(Json& root, const std::string& source, std::string_view list_key,
                    const ListElementReducer& reduce)
      : root_(root), source_(source), list_key_(list_key), reduce_(&reduce) {}

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool value) { return put(Json(value)); }
  bool number_integer(Json::number_integer_t value) { return put(Json(value)); }
  bool number_unsigned(Json::number_unsigned_t value) { return put(Json(value)); }
  bool number_float(Json::number_float_t value, const std::string& /*text*/) {
    return put(Json(value));
  }
  bool string(std::string& value) { return put(Json(std::move(value))); }
  bool binary(Json::binary_t& value) { return put(Json::binary(std::move(value))); }

  bool start_object(std::size_t /*size*/) {
    const std::string name = inner_name();
    Json* object = put_container(Json::object());
    frames_.push_back(Frame{.value = object, .name = name, .keys = {}, .last_key = {}});
    return true;
  }
  bool start_array(std::size_t /*size*/) {
    const std::string name = inner_name();
    // The list: the top-level array, or the array under list_key_ of a top-level object.
    const bool is_list =
        reduce_ != nullptr &&
        (frames_.empty() || (frames_.size() == 1 && frames_[0].value->is_object() &&
                             frames_[0].last_key == list_key_));
    Json* array = put_container(Json::array());
    frames_.push_back(
        Frame{.value = array, .name = name, .keys = {}, .last_key = {}, .is_list = is_list});
    return true;
  }
  bool end_object() {
    end_container();
    return true;
  }
  bool end_array() {
    end_container();
    return true;
  }
  bool key(std::string& key) {
    Frame& frame = frames_.back();
    if (!frame.keys.insert(key).second) {
      throw FormatError(fmt::format("{}: {}: key '{}' appears twice in one object", source_,
                                    frame.name.empty() ? "top level" : frame.name, key));
    }
    frame.last_key = key;
    return true;
  }
  // Remembers the error and stops; parse_json_text words it.
  bool parse_error(std::size_t byte, const std::string& /*last_token*/,
                   const Json::exception& error) {
    error_byte = byte;
    error_what = error.what();
    error_is_syntax = dynamic_cast<const Json::parse_error*>(&error) != nullptr;
    return false;
  }

  size_t error_byte = 0;
  std::string error_what;
  bool error_is_syntax = false;

 private:
  struct Frame {
    Json* value = nullptr;  // the object or array being filled (stable: see put_container)
    std::string name;       // "assignment", "ops[]: inputs[]": where the error says the key is
    std::unordered_set<std::string> keys;
    std::string last_key;
    bool is_list = false;  // the list whose elements reduce_ sees
  };

  void end_container() {
    frames_.pop_back();
    if (!frames_.empty() && frames_.back().is_list) (*reduce_)(frames_.back().value->back());
  }

  // Stores a value in the container being filled (or as the root) and returns where it lives.
  // The containers on the stack are not touched again until their child ends, so the pointers
  // stay valid while it fills.
  Json* put_container(Json value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = frames_.back();
    if (frame.value->is_object()) {
      Json& slot = (*frame.value)[frame.last_key];
      slot = std::move(value);
      return &slot;
    }
    frame.value->push_back(std::move(value));
    return &frame.value->back();
  }
  bool put(Json value) {
    put_container(std::move(value));
    return true;
  }

  // The name of a container that starts now, inside the current one.
  std::string inner_name() const {
    if (frames_.empty()) return "";
    const Frame& outer = frames_.back();
    const std::string own = outer.value->is_object() ? "'" + outer.last_key + "'" : "[]";
    if (outer.name.empty()) return own;
    return outer.value->is_object() ? outer.name + ": " + own : outer.name + own;
  }

  Json& root_;
  const std::string& source_;
  std::string list_key_;
  const ListElementReducer* reduce_ = nullptr;
  std::vector<Frame> frames_;
};

}  // namespace

namespace {

Json parse_with(std::string_view text, const std::string& source, CheckedDomBuilder& builder,
                Json& root) {
  check_nesting_depth(text, source);
  if (Json::sax_parse(text.begin(), text.end(), &builder)) return std::move(root);
  std::string what = builder.error_what;
  if (!builder.error_is_syntax) {
    // A number beyond double's range, e.g. 1e400 ("number overflow parsing '1e400'").
    const size_t detail = what.find("] ");
    if (detail != std::string::npos) what = what.substr(detail + 2);
    throw FormatError(fmt::format("{}: invalid JSON: {}", source, what));
  }
  // nlohmann's message already carries the byte offset; keep it on one line.
  for (char& c : what) {
    if (c == '\n') c = ' ';
  }
  const bool truncated = builder.error_byte >= text.size();
  throw FormatError(fmt::format("{}: {} at byte {}: {}", source,
                                truncated ? "truncated JSON" : "invalid JSON", builder.error_byte,
                                what));
}

// The whole text of a JSON file, read in blocks: a device or a pipe has no size, and /dev/zero as
// a cluster file grew the process by gigabytes. Past kMaxStreamedJsonBytes such an input is
// refused. When the first block of a file that is not regular cannot start a JSON document, that
// block alone is returned: parsing it gives the syntax error at once.
std::string read_json_text(const std::string& path) {
  check_input_path(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(fmt::format("{}: cannot open file", path));
  std::error_code ec;
  const bool regular = std::filesystem::is_regular_file(path, ec);
  std::string text;
  std::vector<char> block(size_t{1} << 16);
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
    const bool first = text.empty();
    text.append(block.data(), static_cast<size_t>(in.gcount()));
    if (first) {
      const size_t start = text.find_first_not_of(" \t\r\n");
      if (start != std::string::npos && text[start] != '{' && text[start] != '[' && !regular) {
        return text;
      }
    }
    if (!regular && text.size() > kMaxStreamedJsonBytes) {
      throw FormatError(fmt::format("{}: more than {} MiB from a file that is not a regular file",
                                    path, kMaxStreamedJsonBytes >> 20));
    }
  }
  if (in.bad()) throw FormatError(fmt::format("{}: cannot read file", path));
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw FormatError(fmt::format("{}: file is empty", path));
  }
  return text;
}

}  // namespace

Json parse_json_text(std::string_view text, const std::string& source) {
  Json root;
  CheckedDomBuilder builder(root, source);
  return parse_with(text, source, builder, root);
}

Json read_json_file(const std::string& path) { return parse_json_text(read_json_text(path), path); }

Json read_json_list_file(const std::string& path, std::string_view list_key,
                         const ListElementReducer& reduce) {
  const std::string text = read_json_text(path);
  Json root;
  CheckedDomBuilder builder(root, path, list_key, reduce);
  return parse_with(text, path, builder, root);
}

void require_object(const Json& value, const JsonContext& ctx) {
  if (!value.is_object()) ctx.fail("expected a JSON object");
}

bool has_field(const Json& obj, std::string_view field) {
  auto it = obj.find(field);
  return it != obj.end() && !it->is_null();
}

namespace {

const Json& require_field(const Json& obj, std::string_view field, const JsonContext& ctx) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) ctx.fail(field, "missing");
  return *it;
}

double number_value(const Json& value, std::string_view field, const JsonContext& ctx) {
  if (!value.is_number()) ctx.fail(field, "expected a number");
  const double x = value.get<double>();
  if (!std::isfinite(x)) ctx.fail(field, "expected a finite number");
  return x;
}

double nonnegative_value(const Json& value, std::string_view field, const JsonContext& ctx) {
  const double x = number_value(value, field, ctx);
  if (x < 0) ctx.fail(field, fmt::format("must be non-negative, got {}", x));
  return x;
}

}  // namespace

std::string get_string(const Json& obj, std::string_view field, const JsonContext& ctx) {
  const Json& value = require_field(obj, field, ctx);
  if (!value.is_string()) ctx.fail(field, "expected a string");
  return value.get<std::string>();
}

std::string get_string_or(const Json& obj, std::string_view field, const JsonContext& ctx,
                          std::string fallback) {
  if (!has_field(obj, field)) return fallback;
  return get_string(obj, field, ctx);
}

double get_number(const Json& obj, std::string_view field, const JsonContext& ctx) {
  return number_value(require_field(obj, field, ctx), field, ctx);
}

double get_nonnegative(const Json& obj, std::string_view field, const JsonContext& ctx) {
  return nonnegative_value(require_field(obj, field, ctx), field, ctx);
}

double get_nonnegative_or(const Json& obj, std::string_view field, const JsonContext& ctx,
                          double fallback) {
  if (!has_field(obj, field)) return fallback;
  return get_nonnegative(obj, field, ctx);
}

double get_positive(const Json& obj, std::string_view field, const JsonContext& ctx) {
  const double x = get_number(obj, field, ctx);
  if (!(x > 0)) ctx.fail(field, fmt::format("must be positive, got {}", x));
  return x;
}

int64_t as_bytes(const Json& value, std::string_view field, const JsonContext& ctx) {
  const double x = nonnegative_value(value, field, ctx);
  if (x > 9.0e18) ctx.fail(field, fmt::format("byte count {} is too large", x));
  if (value.is_number_integer()) return value.get<int64_t>();
  // 12e9 is a byte count written as a float; 1.5 is not a byte count.
  if (x != std::floor(x)) ctx.fail(field, fmt::format("byte count {} is not a whole number", x));
  return static_cast<int64_t>(x);
}

int64_t get_bytes(const Json& obj, std::string_view field, const JsonContext& ctx) {
  return as_bytes(require_field(obj, field, ctx), field, ctx);
}

int64_t get_bytes_or(const Json& obj, std::string_view field, const JsonContext& ctx,
                     int64_t fallback) {
  if (!has_field(obj, field)) return fallback;
  return get_bytes(obj, field, ctx);
}

bool get_bool_or(const Json& obj, std::string_view field, const JsonContext& ctx, bool fallback) {
  if (!has_field(obj, field)) return fallback;
  const Json& value = obj.at(std::string(field));
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number_integer() && (value.get<int64_t>() == 0 || value.get<int64_t>() == 1)) {
    return value.get<int64_t>() == 1;
  }
  ctx.fail(field, "expected true or false");
}

}  // namespace dplace
