#include "common/time.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace chamber {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::system_clock;

TEST(DurationTest, Parses) {
  EXPECT_EQ(ParseDuration("250ms")->count(), 250);
  EXPECT_EQ(ParseDuration("30s")->count(), 30'000);
  EXPECT_EQ(ParseDuration("5m")->count(), 300'000);
  EXPECT_EQ(ParseDuration("1h30m")->count(), 5'400'000);
  EXPECT_EQ(ParseDuration("1.5h")->count(), 5'400'000);
  EXPECT_EQ(ParseDuration("2d")->count(), 172'800'000);
  EXPECT_EQ(ParseDuration("1.5ms")->count(), 2);  // rounds half away from zero
  EXPECT_EQ(ParseDuration("90")->count(), 90'000);
  EXPECT_EQ(ParseDuration("1.5")->count(), 1500);
  EXPECT_EQ(ParseDuration("+2")->count(), 2000);
  EXPECT_EQ(ParseDuration("0")->count(), 0);
  EXPECT_EQ(ParseDuration("-0")->count(), 0);
}

TEST(DurationTest, ErrorsQuoteTheTextAndShowTheForms) {
  for (const char* bad : {"", "5 minutes", "5min", "h", ".", "1..2s", "+5s", "1e3", "inf", "s5"}) {
    Result<milliseconds> d = ParseDuration(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().message(), "\"" + std::string(bad) +
                                        "\" is not a duration (use forms like 250ms, 30s, 5m, "
                                        "1h30m)")
        << bad;
  }
  EXPECT_EQ(ParseDuration("-5").status().message(),
            "\"-5\" is not a duration (use forms like 250ms, 30s, 5m, 1h30m); it must not be "
            "negative");
}

// A bare number of seconds too large for milliseconds in int64 was converted with llround
// (undefined for such values); a long run of units could overflow the sum.
TEST(DurationTest, RefusesDurationsTooLongToHold) {
  EXPECT_NE(ParseDuration("99999999999999999999").status().message().find("it is too long"),
            std::string::npos);
  EXPECT_NE(ParseDuration("3000000000h").status().message().find("it is too long"),
            std::string::npos);
  std::string many;
  for (int i = 0; i < 2000; ++i) many += "90000000h";
  EXPECT_NE(ParseDuration(many).status().message().find("it is too long"), std::string::npos);
  EXPECT_TRUE(ParseDuration("100000d").ok());
}

TEST(DurationTest, Formats) {
  EXPECT_EQ(FormatDuration(milliseconds(5'400'000)), "1h30m");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatDuration(milliseconds(90'061'001)), "25h1m1s1ms");
  EXPECT_EQ(FormatDuration(milliseconds(-1500)), "-1s500ms");
  EXPECT_EQ(FormatDuration(milliseconds(INT64_MIN)), "-2562047788015h12m55s808ms");
}

RC_GTEST_PROP(DurationTest, ParseReadsWhatFormatWrites, ()) {
  const int64_t ms = *rc::gen::inRange<int64_t>(0, 8'000'000'000'000'000);
  Result<milliseconds> back = ParseDuration(FormatDuration(milliseconds(ms)));
  RC_ASSERT(back.ok());
  RC_ASSERT(back->count() == ms);
}

TEST(Rfc3339Test, Formats) {
  const auto t = system_clock::time_point(microseconds(1'700'000'000'123'456));
  EXPECT_EQ(FormatRfc3339(t), "2023-11-14T22:13:20Z");
  EXPECT_EQ(FormatRfc3339(t, TimeFraction::kMillis), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(FormatRfc3339(t, TimeFraction::kMicros), "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(FormatRfc3339(t, TimeFraction::kMillisWhenNonZero), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(FormatRfc3339Ms(1'700'000'000'000), "2023-11-14T22:13:20Z");
  EXPECT_EQ(FormatRfc3339Ms(1'700'000'000'050), "2023-11-14T22:13:20.050Z");
  EXPECT_EQ(FormatRfc3339Ms(0, TimeFraction::kMillis), "1970-01-01T00:00:00.000Z");
  // Before 1970 the time still rounds down.
  EXPECT_EQ(FormatRfc3339Ms(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatRfc3339Ms(-1, TimeFraction::kNone), "1969-12-31T23:59:59Z");
}

TEST(Rfc3339Test, Parses) {
  const auto t = system_clock::time_point(microseconds(1'700'000'000'123'456));
  EXPECT_EQ(ParseRfc3339(FormatRfc3339(t, TimeFraction::kMicros)).value(), t);
  EXPECT_EQ(ParseRfc3339(FormatRfc3339(t)).value(),
            system_clock::time_point(microseconds(1'700'000'000'000'000)));
  EXPECT_EQ(ParseRfc3339("2023-11-15T00:13:20.5+02:00").value(),
            system_clock::time_point(microseconds(1'700'000'000'500'000)));
  EXPECT_EQ(ParseRfc3339("2023-11-14T21:43:20-00:30").value(),
            system_clock::time_point(microseconds(1'700'000'000'000'000)));
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20.123456789z").value(), t);  // nanoseconds dropped
  EXPECT_EQ(ParseRfc3339("2024-02-29T00:00:00Z").value(),
            system_clock::time_point(std::chrono::seconds(1'709'164'800)));
  // The system clock's first and last years hold the times they can.
  EXPECT_TRUE(ParseRfc3339("1677-12-31T00:01:00Z").ok());
  EXPECT_TRUE(ParseRfc3339("2262-01-01T00:00:00Z").ok());
  EXPECT_EQ(ParseRfc3339("2016-12-31T23:59:60Z").value(),  // a leap second
            system_clock::time_point(std::chrono::seconds(1'483'228'800)));
}

TEST(Rfc3339Test, ErrorsQuoteTheText) {
  for (const char* bad : {"",
                          "2023-11-14",
                          "2023-11-14T22:13:20",
                          "2023-13-14T22:13:20Z",
                          "2023-11-14T22:13:20.Z",
                          "2023-11-14T22:13:20Zjunk",
                          "2026-02-30T00:00:00Z",
                          "2026-01-02T25:04:05Z",
                          "2026-01-02 03:04:05Z",
                          "+026-01-02T03:04:05Z",
                          "2026-1-02T03:04:05Z",
                          "2026-01-02T03:04:61Z",
                          "2026-01-02T03:04:05+2:00",
                          "2026-01-02T03:04:05+02:0",
                          "2026-01-02T03:04:05+0200",
                          "2026-01-02T03:04:05+24:00",
                          "2026-01-02T03:04:05+01:60",
                          "2026-01-02T03:04:05+-1:00",
                          "2023-02-29T00:00:00Z",
                          "9999-01-01T00:00:00Z",
                          "0001-01-01T00:00:00Z",
                          "2262-12-31T00:00:00Z",
                          "1677-01-01T00:00:00Z"}) {
    Result<system_clock::time_point> r = ParseRfc3339(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              "\"" + std::string(bad) + "\" is not an RFC 3339 time (like 2026-01-02T03:04:05Z)");
  }
}

RC_GTEST_PROP(Rfc3339Test, ParseReadsWhatFormatWrites, ()) {
  // 1700 to 2199: the system clock counts nanoseconds in 64 bits, from 1678 to 2261.
  const int64_t us = *rc::gen::inRange<int64_t>(-8'520'336'000'000'000, 7'258'118'400'000'000);
  const auto t = system_clock::time_point(microseconds(us));
  Result<system_clock::time_point> back = ParseRfc3339(FormatRfc3339(t, TimeFraction::kMicros));
  RC_ASSERT(back.ok());
  RC_ASSERT(*back == t);
}

}  // namespace
}  // namespace chamber
