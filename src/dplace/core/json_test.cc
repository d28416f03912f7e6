#include "dplace/core/json.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>

#include "dplace/core/error.h"
#include "dplace/core/scratch_dir.h"

namespace dplace {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonTest, MissingFieldNamesSourceObjectAndField) {
  const Json obj = Json::parse(R"({"a": 1})");
  const JsonContext ctx{"g.json", "op 'mm'"};
  EXPECT_EQ(message_of([&] { get_number(obj, "flops", ctx); }),
            "g.json: op 'mm': field 'flops': missing");
}

TEST(JsonTest, NegativeNumberIsRejected) {
  const Json obj = Json::parse(R"({"flops": -3})");
  EXPECT_EQ(message_of([&] {
              get_nonnegative(obj, "flops", {"g.json", ""});
            }),
            "g.json: field 'flops': must be non-negative, got -3");
}

TEST(JsonTest, WrongTypeIsRejected) {
  const Json obj = Json::parse(R"({"name": 3})");
  EXPECT_EQ(message_of([&] {
              get_string(obj, "name", {"g.json", ""});
            }),
            "g.json: field 'name': expected a string");
}

TEST(JsonTest, BytesAcceptFloatNotation) {
  const Json obj = Json::parse(R"({"memory_bytes": 1.2e10, "b": 7})");
  EXPECT_EQ(get_bytes(obj, "memory_bytes", {"c.json", ""}), 12000000000);
  EXPECT_EQ(get_bytes(obj, "b", {"c.json", ""}), 7);
  EXPECT_EQ(get_bytes_or(obj, "absent", {"c.json", ""}, 5), 5);
}

TEST(JsonTest, FractionalBytesAreRejected) {
  // They used to be rounded silently.
  const Json obj = Json::parse(R"({"output_bytes": 1.5})");
  EXPECT_EQ(message_of([&] {
              get_bytes(obj, "output_bytes", {"g.json", "op 'x'"});
            }),
            "g.json: op 'x': field 'output_bytes': byte count 1.5 is not a whole number");
}

TEST(JsonTest, TruncatedTextIsReportedOnOneLine) {
  const std::string m = message_of([] { parse_json_text(R"({"ops": [)", "t.json"); });
  EXPECT_EQ(m.rfind("t.json: truncated JSON at byte", 0), 0u) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos);
}

TEST(JsonTest, NumberBeyondDoubleIsAnErrorNotAnAbort) {
  // nlohmann throws out_of_range for it, which used to escape as an uncaught exception.
  EXPECT_EQ(message_of([] { parse_json_text(R"({"flops": 1e309})", "n.json"); }),
            "n.json: invalid JSON: number overflow parsing '1e309'");
}

TEST(JsonTest, DeepNestingIsRefusedBeforeParsing) {
  // A million nested arrays overflowed the stack when the value was copied.
  const std::string deep = R"({"extra": )" + std::string(1000000, '[');
  EXPECT_EQ(message_of([&] { parse_json_text(deep, "d.json"); }),
            "d.json: invalid JSON at byte 266: nested deeper than 256 levels");
  // Brackets inside strings do not count, escaped quotes do not end a string.
  const std::string in_string = R"({"name": "\"[[[[)" + std::string(1000, '[') + R"("})";
  EXPECT_EQ(parse_json_text(in_string, "s.json").at("name").get<std::string>().size(), 1005u);
  std::string nested = std::string(256, '[') + std::string(256, ']');
  EXPECT_NO_THROW(parse_json_text(nested, "ok.json"));
}

TEST(JsonTest, AKeyGivenTwiceInOneObjectIsRefused) {
  EXPECT_EQ(message_of([] { parse_json_text(R"({"a": 1, "a": 2})", "k.json"); }),
            "k.json: top level: key 'a' appears twice in one object");
  EXPECT_EQ(message_of([] {
              parse_json_text(R"({"links": [{"from": "x"}, {"to": "y", "to": "z"}]})", "k.json");
            }),
            "k.json: 'links'[]: key 'to' appears twice in one object");
  // The same key in sibling objects, or in an object and the one inside it, is fine.
  const Json ok = parse_json_text(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]})", "ok.json");
  EXPECT_EQ(ok.at("b").at(1).at("a").get<int>(), 2);
}

TEST(JsonTest, MissingFileIsReported) {
  EXPECT_EQ(message_of([] { read_json_file("/nonexistent/x.json"); }),
            "/nonexistent/x.json: cannot open file");
}

TEST(JsonTest, AListFileShrinksEachElementAsItIsParsed) {
  const std::string path = scratch_path("list.json");
  const auto reduce = [](Json& element) {
    if (element.is_object() && element.value("keep", false)) {
      element = Json::object({{"id", element["id"]}});  // drop the rest
    } else {
      element = nullptr;
    }
  };
  std::ofstream(path, std::ios::trunc)
      << R"([{"id": 1, "keep": true, "big": [1, 2, 3]}, {"id": 2, "keep": false}, 7,)"
      << R"( [{"keep": true}], {"id": 3, "keep": true, "x": {"y": 1}}])";
  // Elements keep their places; scalars are not given to reduce, nor are nested containers.
  EXPECT_EQ(read_json_list_file(path, "traceEvents", reduce),
            Json::parse(R"([{"id": 1}, null, 7, null, {"id": 3}])"));
  // The array under the key of a top-level object is the list; other arrays are not.
  std::ofstream(path, std::ios::trunc)
      << R"({"other": [{"id": 9}], "traceEvents": [{"id": 4, "keep": true, "z": 0}, {"id": 5}]})";
  EXPECT_EQ(read_json_list_file(path, "traceEvents", reduce),
            Json::parse(R"({"other": [{"id": 9}], "traceEvents": [{"id": 4}, null]})"));
  // Errors are read_json_file's, duplicate keys in a dropped element included.
  std::ofstream(path, std::ios::trunc) << R"([{"id": 1, "id": 2}])";
  EXPECT_EQ(message_of([&] { read_json_list_file(path, "traceEvents", reduce); }),
            path + ": []: key 'id' appears twice in one object");
  std::ofstream(path, std::ios::trunc) << R"([{"id": 1}, )";
  const std::string truncated =
      message_of([&] { read_json_list_file(path, "traceEvents", reduce); });
  EXPECT_EQ(truncated.rfind(path + ": truncated JSON at byte 13", 0), 0u) << truncated;
}

TEST(JsonTest, BoolAcceptsZeroAndOne) {
  const Json obj = Json::parse(R"({"a": true, "b": 0, "c": "x"})");
  EXPECT_TRUE(get_bool_or(obj, "a", {"f", ""}, false));
  EXPECT_FALSE(get_bool_or(obj, "b", {"f", ""}, true));
  EXPECT_TRUE(get_bool_or(obj, "d", {"f", ""}, true));
  EXPECT_EQ(message_of([&] {
              get_bool_or(obj, "c", {"f", ""}, true);
            }),
            "f: field 'c': expected true or false");
}

}  // namespace
}  // namespace dplace
