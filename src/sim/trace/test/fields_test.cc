#include "sim/trace/fields.h"

#include <gtest/gtest.h>

namespace chamber::sim::trace_internal {
namespace {

TEST(FieldsTest, Integers) {
  EXPECT_EQ(*ParseInteger("42", 0, 100), 42);
  EXPECT_EQ(*ParseInteger(" 7 ", 0, 100), 7);
  EXPECT_EQ(*ParseInteger("8.0", 0, 100), 8);  // pandas' integral floats
  EXPECT_EQ(*ParseInteger("-3", -5, 5), -3);
  EXPECT_EQ(ParseInteger("8.5", 0, 100).status().message(), "\"8.5\" is not an integer");
  EXPECT_EQ(ParseInteger("x1", 0, 100).status().message(), "\"x1\" is not an integer");
  EXPECT_EQ(ParseInteger("101", 0, 100).status().message(), "\"101\" is out of range [0, 100]");
  EXPECT_EQ(ParseInteger("99999999999999999999999", 0, 100).status().message(),
            "\"99999999999999999999999\" is out of range [0, 100]");
  EXPECT_EQ(ParseInteger("", 0, 1).status().message(), "must not be empty");
}

TEST(FieldsTest, SecondsAreExactMilliseconds) {
  EXPECT_EQ(*ParseSecondsMs("0"), 0);
  EXPECT_EQ(*ParseSecondsMs("12"), 12000);
  EXPECT_EQ(*ParseSecondsMs("130.5"), 130500);
  EXPECT_EQ(*ParseSecondsMs("0.001"), 1);
  EXPECT_EQ(*ParseSecondsMs("0.0015"), 2);  // rounded half up to the millisecond
  EXPECT_EQ(*ParseSecondsMs("1h30m"), 5'400'000);
  EXPECT_EQ(*ParseSecondsMs("250ms"), 250);
  EXPECT_FALSE(ParseSecondsMs("-5").ok());
  EXPECT_FALSE(ParseSecondsMs("5x").ok());
  EXPECT_FALSE(ParseSecondsMs("").ok());
  EXPECT_EQ(ParseSecondsMs("99999999999999999999").status().message(),
            "\"99999999999999999999\" is out of range");
  EXPECT_EQ(ParseSecondsMs("3000000000h").status().message(), "\"3000000000h\" is out of range");
}

TEST(FieldsTest, DateTimes) {
  EXPECT_EQ(*ParseDateTimeMs("1970-01-01 00:00:00"), 0);
  // date -u -d '2020-06-09 18:41:01' +%s = 1591728061
  EXPECT_EQ(*ParseDateTimeMs("2020-06-09 18:41:01"), 1'591'728'061'000);
  EXPECT_EQ(*ParseDateTimeMs("2020-06-09T18:41:01Z"), 1'591'728'061'000);
  EXPECT_EQ(*ParseDateTimeMs("2020-06-09 18:41:01.250"), 1'591'728'061'250);
  EXPECT_EQ(*ParseDateTimeMs("2016-02-29 00:00:00"), 1'456'704'000'000);  // a leap day
  EXPECT_EQ(ParseDateTimeMs("2017-02-29 00:00:00").status().message(),
            "\"2017-02-29 00:00:00\" is not a valid date-time");
  EXPECT_EQ(ParseDateTimeMs("2017-10-03 2:54:47").status().message(),
            "\"2017-10-03 2:54:47\" is not a date-time (expected \"YYYY-MM-DD HH:MM:SS\")");
  EXPECT_FALSE(ParseDateTimeMs("2017-10-03 24:00:00").ok());
  // ParseTimeMs takes date-times and epoch seconds alike.
  EXPECT_EQ(*ParseTimeMs("2020-06-09 18:41:01"), 1'591'728'061'000);
  EXPECT_EQ(*ParseTimeMs("1591728061"), 1'591'728'061'000);
}

TEST(FieldsTest, Models) {
  EXPECT_EQ(SplitModels("V100M16|V100M32|V100M32"),
            (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(SplitModels(" A100 || H100 "), (std::vector<std::string>{"A100", "H100"}));
  EXPECT_TRUE(SplitModels("nan").empty());
  // A model spelled like a missing value is none: written back as CSV it would read as none.
  EXPECT_EQ(SplitModels("A100|null|None"), (std::vector<std::string>{"A100"}));
  EXPECT_TRUE(SplitModels("").empty());
}

TEST(FieldsTest, FormatSeconds) {
  EXPECT_EQ(FormatSeconds(0), "0");
  EXPECT_EQ(FormatSeconds(1500), "1.5");
  EXPECT_EQ(FormatSeconds(1), "0.001");
  EXPECT_EQ(FormatSeconds(5'400'000), "5400");
  EXPECT_EQ(FormatSeconds(120), "0.12");
}

}  // namespace
}  // namespace chamber::sim::trace_internal
