#include "dplace/placers/common/params.h"

#include <gtest/gtest.h>

#include "dplace/core/error.h"

namespace dplace {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PlacerParamsTest, UnknownKeyNamesPlacerKeyAndKnownKeys) {
  const std::map<std::string, std::string> given = {{"evaluation", "10"}};
  EXPECT_EQ(error_of([&] {
              PlacerParams p("anneal", given, {"evaluations", "t_start"});
            }),
            "placer 'anneal': unknown --param 'evaluation' (known: evaluations, t_start)");
}

TEST(PlacerParamsTest, ParsesValuesAndFallsBackToDefaults) {
  const std::map<std::string, std::string> given = {{"x", "0.25"}, {"n", "12"}, {"mode", "all"}};
  const PlacerParams p("test", given, {"x", "n", "mode", "absent"});
  EXPECT_DOUBLE_EQ(p.get_double("x", 1.0, 0.0, 1.0), 0.25);
  EXPECT_EQ(p.get_int("n", 3, 0, 100), 12);
  EXPECT_EQ(p.get_choice("mode", "accelerators", {"accelerators", "all"}), "all");
  EXPECT_DOUBLE_EQ(p.get_double("absent", 0.5, 0.0, 1.0), 0.5);
  EXPECT_TRUE(p.has("x"));
  EXPECT_FALSE(p.has("absent"));
}

TEST(PlacerParamsTest, AFileIsAbsentGivenOrAnErrorWhenEmpty) {
  const std::map<std::string, std::string> given = {{"curve", "c.csv"}, {"log", ""}};
  const PlacerParams p("test", given, {"curve", "log", "absent"});
  EXPECT_EQ(p.get_file("curve"), "c.csv");
  EXPECT_EQ(p.get_file("absent"), "");
  EXPECT_EQ(error_of([&] { p.get_file("log"); }), "placer 'test': --param log= needs a file name");
}

TEST(PlacerParamsTest, RejectsMalformedAndOutOfRangeValues) {
  const std::map<std::string, std::string> given = {
      {"x", "abc"}, {"n", "1.5"}, {"big", "7"}, {"mode", "some"}};
  const PlacerParams p("m-etf", given, {"x", "n", "big", "mode"});
  EXPECT_EQ(error_of([&] { p.get_double("x", 0, 0, 1); }),
            "placer 'm-etf': --param x='abc' is not a number");
  EXPECT_EQ(error_of([&] { p.get_int("n", 0, 0, 10); }),
            "placer 'm-etf': --param n='1.5' is not an integer");
  EXPECT_EQ(error_of([&] { p.get_int("big", 0, 0, 5); }),
            "placer 'm-etf': --param big=7 is outside [0, 5]");
  EXPECT_EQ(error_of([&] {
              p.get_choice("mode", "a", {"a", "b"});
            }),
            "placer 'm-etf': --param mode='some' is not one of: a, b");
}

}  // namespace
}  // namespace dplace
