// Property-based fuzzing of the shared parsers (durations, RFC 3339 times, quantities): whatever
// bytes come in, a parser returns a value or an error that quotes the text, and never crashes
// (this binary also runs under ASan and UBSan).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "common/quantity.h"
#include "common/testing/mutate_text.h"
#include "common/time.h"

namespace chamber {
namespace {

std::string Mutate(std::string_view text) {
  static constexpr std::string_view kTokens[] = {"-",
                                                 "+",
                                                 ".",
                                                 ":",
                                                 "T",
                                                 "Z",
                                                 "e",
                                                 "E",
                                                 "h",
                                                 "m",
                                                 "s",
                                                 "ms",
                                                 "d",
                                                 "Gi",
                                                 "Ki",
                                                 "k",
                                                 "99999999999999999999",
                                                 "60",
                                                 "24",
                                                 "00",
                                                 "1e308",
                                                 " "};
  const auto ops = *rc::gen::container<std::vector<int>>(*rc::gen::inRange<size_t>(3, 30),
                                                         rc::gen::inRange(0, 1 << 20));
  return fuzz::MutateText(std::string(text), ops, kTokens);
}

RC_GTEST_PROP(CommonParserFuzz, DurationsNeverCrash, ()) {
  const std::string text =
      Mutate(*rc::gen::element<std::string_view>("1h30m", "250ms", "90", "1.5d"));
  Result<std::chrono::milliseconds> d = ParseDuration(text);
  if (d.ok()) {
    RC_ASSERT(d->count() >= 0);
  } else {
    RC_ASSERT(d.status().message().rfind("\"" + text + "\"", 0) == 0);
  }
}

RC_GTEST_PROP(CommonParserFuzz, TimesNeverCrash, ()) {
  const std::string text = Mutate(*rc::gen::element<std::string_view>(
      "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123456+02:00", "2016-12-31T23:59:60-00:30"));
  Result<std::chrono::system_clock::time_point> t = ParseRfc3339(text);
  if (t.ok()) {
    // What it reads, it writes back as a time it reads again to the same point.
    Result<std::chrono::system_clock::time_point> back =
        ParseRfc3339(FormatRfc3339(*t, TimeFraction::kMicros));
    RC_ASSERT(back.ok());
    RC_ASSERT(*back == std::chrono::floor<std::chrono::microseconds>(*t));
  } else {
    RC_ASSERT(t.status().message() ==
              "\"" + text + "\" is not an RFC 3339 time (like 2026-01-02T03:04:05Z)");
  }
}

RC_GTEST_PROP(CommonParserFuzz, QuantitiesNeverCrash, ()) {
  const std::string text =
      Mutate(*rc::gen::element<std::string_view>("500m", "1.5Gi", "2E6", "16Gi", "4"));
  Result<int64_t> cpu = ParseCpuMilli(text);
  if (!cpu.ok()) RC_ASSERT(cpu.status().message().find(text) != std::string::npos);
  Result<int64_t> bytes = ParseBytes(text);
  if (!bytes.ok()) RC_ASSERT(bytes.status().message().find(text) != std::string::npos);
}

// Any text is an amount of GPUs within the bound, which prints back to itself in thousandths,
// or an error naming it.
RC_GTEST_PROP(CommonParserFuzz, GpuAmountsParseExactlyOrNameTheText, ()) {
  const std::string text = Mutate(
      *rc::gen::element<std::string_view>("8", "2.5", "0.125", "500m", "1000000000", "1.000"));
  Result<int64_t> milli = ParseGpuMilli(text, 1'000'000'000);
  if (!milli.ok()) {
    RC_ASSERT(milli.status().message().find(text) != std::string::npos);
    return;
  }
  RC_ASSERT(*milli >= 0);
  RC_ASSERT(*milli <= int64_t{1'000'000'000} * 1000);
  const bool in_milli = text.back() == 'm';
  RC_ASSERT(*ParseGpuMilli(in_milli ? std::to_string(*milli) + "m"
                                    : std::to_string(*milli / 1000) + "." +
                                          std::to_string(1000 + *milli % 1000).substr(1),
                           1'000'000'000) == *milli);
}

}  // namespace
}  // namespace chamber
