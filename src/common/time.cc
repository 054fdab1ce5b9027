#include "common/time.h"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace chamber {
namespace {

using std::chrono::milliseconds;

// Durations past this many milliseconds (about 285 years) are refused, so that sums of a few
// of them stay far from int64's end.
constexpr double kMaxDurationMs = 9e15;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// `text` (digits and dots) as a number; false when strtod does not take all of it.
bool ToDouble(std::string_view text, double* out) {
  const std::string number(text);
  char* end = nullptr;
  *out = std::strtod(number.c_str(), &end);
  return !number.empty() && end == number.c_str() + number.size() && std::isfinite(*out);
}

// Reads exactly `n` digits at `text[*i]`.
bool Digits(std::string_view text, size_t* i, size_t n, int* out) {
  if (*i + n > text.size()) return false;
  int v = 0;
  for (size_t k = 0; k < n; ++k) {
    if (!IsDigit(text[*i + k])) return false;
    v = v * 10 + (text[*i + k] - '0');
  }
  *i += n;
  *out = v;
  return true;
}

bool Expect(std::string_view text, size_t* i, char c) {
  if (*i >= text.size() || text[*i] != c) return false;
  ++*i;
  return true;
}

}  // namespace

Result<milliseconds> ParseDuration(std::string_view text) {
  const std::string bad =
      "\"" + std::string(text) + "\" is not a duration (use forms like 250ms, 30s, 5m, 1h30m)";
  if (text.empty()) return Status::InvalidArgument(bad);
  // A bare number is seconds: "90", "1.5", "+2".
  const bool sign = text[0] == '+' || text[0] == '-';
  const std::string_view unsigned_part = text.substr(sign ? 1 : 0);
  if (!unsigned_part.empty() &&
      unsigned_part.find_first_not_of("0123456789.") == std::string_view::npos) {
    double seconds = 0;
    if (!ToDouble(unsigned_part, &seconds)) return Status::InvalidArgument(bad);
    if (text[0] == '-' && seconds != 0)
      return Status::InvalidArgument(bad + "; it must not be negative");
    if (!(seconds * 1000 < kMaxDurationMs))
      return Status::InvalidArgument(bad + "; it is too long");
    return milliseconds(std::llround(seconds * 1000));
  }
  // Numbers with units: "1h30m", "1.5h", "250ms".
  double total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && (IsDigit(text[j]) || text[j] == '.')) ++j;
    double v = 0;
    if (j == i || !ToDouble(text.substr(i, j - i), &v)) return Status::InvalidArgument(bad);
    size_t k = j;
    while (k < text.size() && std::isalpha(static_cast<unsigned char>(text[k]))) ++k;
    const std::string_view unit = text.substr(j, k - j);
    double factor = 0;
    if (unit == "ms") {
      factor = 1;
    } else if (unit == "s") {
      factor = 1000;
    } else if (unit == "m") {
      factor = 60'000;
    } else if (unit == "h") {
      factor = 3'600'000;
    } else if (unit == "d") {
      factor = 86'400'000;
    } else {
      return Status::InvalidArgument(bad);
    }
    total_ms += std::round(v * factor);
    if (!(total_ms < kMaxDurationMs)) return Status::InvalidArgument(bad + "; it is too long");
    i = k;
  }
  return milliseconds(static_cast<int64_t>(total_ms));
}

std::string FormatDuration(milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  uint64_t abs = static_cast<uint64_t>(ms);
  if (ms < 0) {
    out = "-";
    abs = 0 - abs;
  }
  const uint64_t h = abs / 3'600'000, m = abs / 60'000 % 60, s = abs / 1000 % 60, rest = abs % 1000;
  if (h) out += std::to_string(h) + "h";
  if (m) out += std::to_string(m) + "m";
  if (s) out += std::to_string(s) + "s";
  if (rest) out += std::to_string(rest) + "ms";
  return out;
}

std::string FormatRfc3339(std::chrono::system_clock::time_point t, TimeFraction fraction) {
  using namespace std::chrono;
  const auto us = floor<microseconds>(t);
  const sys_days day = floor<days>(us);
  const year_month_day date{day};
  const hh_mm_ss<microseconds> clock{us - day};
  std::string out =
      fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", static_cast<int>(date.year()),
                  static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                  clock.hours().count(), clock.minutes().count(), clock.seconds().count());
  const int64_t micros = clock.subseconds().count();
  switch (fraction) {
    case TimeFraction::kNone:
      break;
    case TimeFraction::kMillis:
      out += fmt::format(".{:03}", micros / 1000);
      break;
    case TimeFraction::kMicros:
      out += fmt::format(".{:06}", micros);
      break;
    case TimeFraction::kMillisWhenNonZero:
      if (micros / 1000 != 0) out += fmt::format(".{:03}", micros / 1000);
      break;
  }
  return out + "Z";
}

std::string FormatRfc3339Ms(int64_t unix_ms, TimeFraction fraction) {
  return FormatRfc3339(std::chrono::system_clock::time_point(milliseconds(unix_ms)), fraction);
}

Result<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text) {
  using namespace std::chrono;
  auto bad = [&] {
    return Status::InvalidArgument("\"" + std::string(text) +
                                   "\" is not an RFC 3339 time (like 2026-01-02T03:04:05Z)");
  };
  size_t i = 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!Digits(text, &i, 4, &y) || !Expect(text, &i, '-') || !Digits(text, &i, 2, &mo) ||
      !Expect(text, &i, '-') || !Digits(text, &i, 2, &d) || !Expect(text, &i, 'T') ||
      !Digits(text, &i, 2, &h) || !Expect(text, &i, ':') || !Digits(text, &i, 2, &mi) ||
      !Expect(text, &i, ':') || !Digits(text, &i, 2, &sec))
    return bad();
  int64_t micros = 0;
  if (i < text.size() && text[i] == '.') {
    const size_t start = ++i;
    for (; i < text.size() && IsDigit(text[i]); ++i)
      if (i - start < 6) micros = micros * 10 + (text[i] - '0');
    if (i == start) return bad();
    for (size_t n = i - start; n < 6; ++n) micros *= 10;
  }
  int64_t offset_s = 0;
  const std::string_view zone = text.substr(i);
  if (zone == "Z" || zone == "z") {
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-')) {
    size_t k = 1;
    int oh = 0, om = 0;
    if (!Digits(zone, &k, 2, &oh) || !Expect(zone, &k, ':') || !Digits(zone, &k, 2, &om) ||
        oh > 23 || om > 59)
      return bad();
    offset_s = (zone[0] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
  } else {
    return bad();
  }
  const year_month_day date{year(y), month(static_cast<unsigned>(mo)),
                            day(static_cast<unsigned>(d))};
  if (!date.ok() || h > 23 || mi > 59 || sec > 60) return bad();
  const int64_t unix_s = sys_days(date).time_since_epoch().count() * int64_t{86400} + h * 3600 +
                         mi * 60 + sec - offset_s;
  // The system clock counts nanoseconds in 64 bits: from 1677 to 2262.
  constexpr int64_t kMaxSeconds = duration_cast<seconds>(system_clock::duration::max()).count() - 1;
  if (unix_s < -kMaxSeconds || unix_s > kMaxSeconds) return bad();
  return system_clock::time_point(seconds(unix_s)) + microseconds(micros);
}

}  // namespace chamber
