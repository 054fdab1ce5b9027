#include "common/quantity.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

namespace chamber {
namespace {

// Splits "1.5Gi" into 1.5 and "Gi"; fails on anything else.
bool SplitNumber(std::string_view text, double* value, std::string_view* suffix) {
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  bool digits = false;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) {
    digits = digits || text[i] != '.';
    ++i;
  }
  if (!digits) return false;
  const std::string number(text.substr(0, i));
  char* end = nullptr;
  *value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(*value)) return false;
  *suffix = text.substr(i);
  return true;
}

// A decimal exponent suffix ("1e3", "2.5E-1", as Kubernetes quantities allow) folded into the
// value; the suffix becomes empty. Leaves anything else (units such as "Ei") alone.
void FoldExponent(double* value, std::string_view* suffix) {
  std::string_view s = *suffix;
  if (s.size() < 2 || (s[0] != 'e' && s[0] != 'E')) return;
  size_t i = 1;
  if (s[i] == '+' || s[i] == '-') ++i;
  if (i >= s.size()) return;
  int exponent = 0;
  const auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), exponent);
  if (ec != std::errc() || end != s.data() + s.size()) return;
  *value *= std::pow(10.0, s[1] == '-' ? -exponent : exponent);
  *suffix = {};
}

Result<int64_t> ToInt64(double v, std::string_view text) {
  if (!(std::abs(v) < 9.2e18))
    return Status::InvalidArgument("quantity " + std::string(text) + " is too large");
  return static_cast<int64_t>(std::llround(v));
}

}  // namespace

Result<int64_t> ParseCpuMilli(std::string_view text) {
  double v = 0;
  std::string_view suffix;
  if (!SplitNumber(text, &v, &suffix))
    return Status::InvalidArgument("\"" + std::string(text) +
                                   "\" is not a CPU quantity (use forms like 4, 500m, 1.5)");
  FoldExponent(&v, &suffix);
  if (suffix == "m") return ToInt64(v, text);
  if (suffix.empty()) return ToInt64(v * 1000, text);
  if (suffix == "k") return ToInt64(v * 1e6, text);
  return Status::InvalidArgument("\"" + std::string(text) + "\": unknown CPU unit \"" +
                                 std::string(suffix) + "\"");
}

Result<int64_t> ParseGpuMilli(std::string_view text, int64_t max_gpus) {
  const auto fail = [&](const std::string& why) {
    return Status::InvalidArgument("\"" + std::string(text) + "\" " + why);
  };
  const bool milli = !text.empty() && text.back() == 'm';
  const std::string_view number = milli ? text.substr(0, text.size() - 1) : text;
  const size_t dot = number.find('.');
  const std::string_view whole = number.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : number.substr(dot + 1);
  const auto digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (whole.empty() || !digits(whole) || !digits(fraction) ||
      (dot != std::string_view::npos && (fraction.empty() || milli)))
    return fail("is not an amount of GPUs (use forms like 8, 2.5, 500m)");
  if (fraction.size() > 3) return fail("has more than 3 decimals: GPUs are counted in thousandths");
  const int64_t per_gpu = 1000;
  const int64_t max_milli = max_gpus * per_gpu;
  int64_t value = 0;
  for (char c : whole) {
    value = value * 10 + (c - '0');
    if (value > max_milli) return fail("is more than " + std::to_string(max_gpus) + " GPUs");
  }
  if (!milli) {
    int64_t part = 0;
    for (size_t i = 0; i < 3; ++i) part = part * 10 + (i < fraction.size() ? fraction[i] - '0' : 0);
    if (value > max_milli / per_gpu)
      return fail("is more than " + std::to_string(max_gpus) + " GPUs");
    value = value * per_gpu + part;
  }
  if (value > max_milli) return fail("is more than " + std::to_string(max_gpus) + " GPUs");
  return value;
}

Result<int64_t> ParseBytes(std::string_view text) {
  double v = 0;
  std::string_view suffix;
  if (!SplitNumber(text, &v, &suffix))
    return Status::InvalidArgument("\"" + std::string(text) +
                                   "\" is not a memory quantity (use forms like 512Mi, 16Gi, 1G)");
  FoldExponent(&v, &suffix);
  static constexpr std::pair<std::string_view, double> kUnits[] = {{"", 1},
                                                                   {"k", 1e3},
                                                                   {"M", 1e6},
                                                                   {"G", 1e9},
                                                                   {"T", 1e12},
                                                                   {"P", 1e15},
                                                                   {"Ki", 1024.0},
                                                                   {"Mi", 1048576.0},
                                                                   {"Gi", 1073741824.0},
                                                                   {"Ti", 1099511627776.0},
                                                                   {"Pi", 1125899906842624.0}};
  for (const auto& [unit, factor] : kUnits)
    if (suffix == unit) return ToInt64(v * factor, text);
  return Status::InvalidArgument("\"" + std::string(text) + "\": unknown memory unit \"" +
                                 std::string(suffix) + "\"");
}

}  // namespace chamber
