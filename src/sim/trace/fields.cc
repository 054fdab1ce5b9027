#include "sim/trace/fields.h"

#include <charconv>
#include <cmath>

#include "common/time.h"

namespace chamber::sim::trace_internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Reads exactly `n` digits at `text[*i]`.
bool Digits(std::string_view text, size_t* i, size_t n, int* out) {
  if (*i + n > text.size()) return false;
  int v = 0;
  for (size_t k = 0; k < n; ++k) {
    const char c = text[*i + k];
    if (!IsDigit(c)) return false;
    v = v * 10 + (c - '0');
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

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int DaysInMonth(int y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

// Fractional digits after a '.', as milliseconds rounded half up; `*i` points after the '.'.
bool FractionMs(std::string_view text, size_t* i, int64_t* ms) {
  const size_t start = *i;
  int64_t v = 0;
  int n = 0;
  bool round_up = false;
  while (*i < text.size() && IsDigit(text[*i])) {
    if (n < 3) {
      v = v * 10 + (text[*i] - '0');
    } else if (n == 3) {
      round_up = text[*i] >= '5';
    }
    ++n;
    ++*i;
  }
  if (*i == start) return false;
  for (int k = n; k < 3; ++k) v *= 10;
  *ms = v + (round_up ? 1 : 0);
  return true;
}

}  // namespace

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string Quote(std::string_view text) {
  constexpr size_t kMax = 40;
  std::string out = "\"";
  for (char c : text.substr(0, kMax)) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += '?';
    } else {
      out += c;
    }
  }
  if (text.size() > kMax) out += "...";
  out += '"';
  return out;
}

Result<int64_t> ParseInteger(std::string_view text, int64_t min, int64_t max) {
  text = Trim(text);
  if (text.empty()) return Status::InvalidArgument("must not be empty");
  int64_t v = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (*begin == '+') ++begin;  // from_chars takes no '+'
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec == std::errc::result_out_of_range) {
    return Status::InvalidArgument(Quote(text) + " is out of range [" + std::to_string(min) + ", " +
                                   std::to_string(max) + "]");
  }
  if (ec != std::errc() || ptr != end) {
    // "8.0": an integral value written as a float.
    double d = 0;
    auto [dptr, dec] = std::from_chars(begin, end, d, std::chars_format::fixed);
    if (dec != std::errc() || dptr != end || !std::isfinite(d) || d != std::floor(d) ||
        std::abs(d) > 9e15) {
      return Status::InvalidArgument(Quote(text) + " is not an integer");
    }
    v = static_cast<int64_t>(d);
  }
  if (v < min || v > max) {
    return Status::InvalidArgument(Quote(text) + " is out of range [" + std::to_string(min) + ", " +
                                   std::to_string(max) + "]");
  }
  return v;
}

Result<int64_t> ParseSecondsMs(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return Status::InvalidArgument("must not be empty");
  // Fast path, exact: digits with an optional fraction.
  size_t i = 0;
  int64_t whole = 0;
  while (i < text.size() && IsDigit(text[i]) && i < 16) whole = whole * 10 + (text[i++] - '0');
  if (i > 0 && i < 16) {
    int64_t frac = 0;
    bool ok = true;
    if (i < text.size() && text[i] == '.') {
      ++i;
      ok = i == text.size() || FractionMs(text, &i, &frac);
    }
    if (ok && i == text.size()) {
      if (whole > kMaxMillis / 1000 - 1) {
        return Status::InvalidArgument(Quote(text) + " is too large");
      }
      return whole * 1000 + frac;
    }
  }
  // Durations with units, through the one duration parser ("1h30m", "250ms").
  if (text.size() > 64) return Status::InvalidArgument(Quote(text) + " is not a number of seconds");
  Result<std::chrono::milliseconds> d = ParseDuration(text);
  if (!d.ok() && d.status().message().ends_with("it is too long")) {
    return Status::InvalidArgument(Quote(text) + " is out of range");
  }
  if (!d.ok()) return d.status();
  if (d->count() < 0 || d->count() > kMaxMillis) {
    return Status::InvalidArgument(Quote(text) + " is out of range");
  }
  return d->count();
}

bool LooksLikeDateTime(std::string_view text) {
  text = Trim(text);
  return text.size() >= 10 && IsDigit(text[0]) && IsDigit(text[1]) && IsDigit(text[2]) &&
         IsDigit(text[3]) && text[4] == '-';
}

Result<int64_t> ParseDateTimeMs(std::string_view text) {
  text = Trim(text);
  const auto bad = [&] {
    return Status::InvalidArgument(Quote(text) +
                                   " is not a date-time (expected \"YYYY-MM-DD HH:MM:SS\")");
  };
  size_t i = 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!Digits(text, &i, 4, &y) || !Expect(text, &i, '-') || !Digits(text, &i, 2, &mo) ||
      !Expect(text, &i, '-') || !Digits(text, &i, 2, &d)) {
    return bad();
  }
  if (i >= text.size() || (text[i] != ' ' && text[i] != 'T')) return bad();
  ++i;
  if (!Digits(text, &i, 2, &h) || !Expect(text, &i, ':') || !Digits(text, &i, 2, &mi) ||
      !Expect(text, &i, ':') || !Digits(text, &i, 2, &s)) {
    return bad();
  }
  int64_t ms = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!FractionMs(text, &i, &ms)) return bad();
  }
  if (i < text.size() && text[i] == 'Z') ++i;
  if (i != text.size()) return bad();
  if (mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo) || h > 23 || mi > 59 || s > 59) {
    return Status::InvalidArgument(Quote(text) + " is not a valid date-time");
  }
  const int64_t days = DaysFromCivil(y, mo, d);
  return ((days * 24 + h) * 60 + mi) * 60 * 1000 + s * 1000 + ms;
}

Result<int64_t> ParseTimeMs(std::string_view text) {
  if (LooksLikeDateTime(text)) return ParseDateTimeMs(text);
  Result<int64_t> ms = ParseSecondsMs(text);
  // Keep "must not be empty" and range errors; say what a time may look like otherwise.
  if (ms.ok() || ms.status().message().find(" is not a ") == std::string::npos) return ms;
  return Status::InvalidArgument(Quote(Trim(text)) +
                                 " is not a time (use seconds, a duration like 1h30m, or "
                                 "\"YYYY-MM-DD HH:MM:SS\")");
}

bool IsMissing(std::string_view text) {
  text = Trim(text);
  return text.empty() || text == "nan" || text == "NaN" || text == "None" || text == "null";
}

std::vector<std::string> SplitModels(std::string_view text) {
  std::vector<std::string> out;
  if (IsMissing(text)) return out;
  while (true) {
    const size_t bar = text.find('|');
    const std::string_view model = Trim(text.substr(0, bar));
    if (!IsMissing(model)) {
      bool seen = false;
      for (const std::string& m : out) seen = seen || m == model;
      if (!seen) out.emplace_back(model);
    }
    if (bar == std::string_view::npos) break;
    text.remove_prefix(bar + 1);
  }
  return out;
}

std::string FormatSeconds(int64_t ms) {
  std::string out = ms < 0 ? "-" : "";
  const uint64_t abs = ms < 0 ? 0 - static_cast<uint64_t>(ms) : static_cast<uint64_t>(ms);
  out += std::to_string(abs / 1000);
  uint64_t frac = abs % 1000;
  if (frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, 3 - digits.size(), '0');
    while (digits.back() == '0') digits.pop_back();
    out += '.';
    out += digits;
  }
  return out;
}

}  // namespace chamber::sim::trace_internal
