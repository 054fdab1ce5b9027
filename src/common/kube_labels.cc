#include "common/kube_labels.h"

#include <algorithm>

namespace chamber {
namespace {

bool Alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

}  // namespace

bool IsLabelValue(std::string_view value) {
  if (value.empty()) return true;
  return value.size() <= 63 && Alnum(value.front()) && Alnum(value.back()) &&
         std::all_of(value.begin(), value.end(),
                     [](char c) { return Alnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool IsLabelKey(std::string_view key) {
  const size_t slash = key.find('/');
  const std::string_view name = slash == std::string_view::npos ? key : key.substr(slash + 1);
  if (name.empty() || !IsLabelValue(name)) return false;
  if (slash == std::string_view::npos) return true;
  const std::string_view prefix = key.substr(0, slash);
  return !prefix.empty() && prefix.size() <= 253 && Alnum(prefix.front()) && Alnum(prefix.back()) &&
         std::all_of(prefix.begin(), prefix.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
         });
}

}  // namespace chamber
