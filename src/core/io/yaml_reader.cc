#include "core/io/yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

namespace chamber::core::io {
namespace {

// Counts documents and builds nothing.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

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

Result<Duration> ParseDuration(std::string_view text) {
  const std::string bad =
      "\"" + std::string(text) + "\" is not a duration (use forms like 250ms, 30s, 5m, 1h30m)";
  if (text.empty()) return Status::InvalidArgument(bad);
  double seconds_only = 0;
  std::string_view suffix;
  if (SplitNumber(text, &seconds_only, &suffix) && suffix.empty()) {
    if (seconds_only < 0) return Status::InvalidArgument(bad + "; it must not be negative");
    return Duration(static_cast<int64_t>(std::llround(seconds_only * 1000)));
  }
  int64_t total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && ((text[j] >= '0' && text[j] <= '9') || text[j] == '.')) ++j;
    if (j == i) return Status::InvalidArgument(bad);
    double v = 0;
    const std::string number(text.substr(i, j - i));
    char* end = nullptr;
    v = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size()) return Status::InvalidArgument(bad);
    size_t k = j;
    while (k < text.size() && std::isalpha(static_cast<unsigned char>(text[k]))) ++k;
    const std::string_view unit = text.substr(j, k - j);
    double factor = 0;
    if (unit == "ms")
      factor = 1;
    else if (unit == "s")
      factor = 1000;
    else if (unit == "m")
      factor = 60'000;
    else if (unit == "h")
      factor = 3'600'000;
    else if (unit == "d")
      factor = 86'400'000;
    else
      return Status::InvalidArgument(bad);
    if (!(v * factor < 9e15)) return Status::InvalidArgument(bad + "; it is too long");
    total_ms += static_cast<int64_t>(std::llround(v * factor));
    i = k;
  }
  return Duration(total_ms);
}

std::string FormatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  const int64_t h = ms / 3'600'000, m = ms / 60'000 % 60, s = ms / 1000 % 60, rest = ms % 1000;
  if (h) out += std::to_string(h) + "h";
  if (m) out += std::to_string(m) + "m";
  if (s) out += std::to_string(s) + "s";
  if (rest) out += std::to_string(rest) + "ms";
  return out;
}

Result<YAML::Node> YamlReader::Load(std::string_view text) const {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source_ + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

Result<YAML::Node> YamlReader::LoadSection(std::string_view text, const std::string& key,
                                           bool* found) const {
  if (found) *found = false;
  CHAMBER_ASSIGN_OR_RETURN(YAML::Node root, Load(text));
  if (root.IsNull() || !root.IsMap() || !root[key]) return YAML::Node(YAML::NodeType::Null);
  if (found) *found = true;
  return root[key];
}

Result<std::vector<YAML::Node>> YamlReader::LoadAll(std::string_view text) const {
  try {
    // yaml-cpp 0.7's parser can hand out empty documents without end on some malformed streams
    // (a stray quote inside a flow map after a leading comma), and YAML::LoadAll then never
    // returns. A stream holds at most one document per line (plus one), so the documents are
    // counted first, up to that bound.
    const size_t most = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 2;
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    DocumentCounter counter;
    for (size_t docs = 0; parser.HandleNextDocument(counter);) {
      if (++docs > most)
        return Status::InvalidArgument(source_ +
                                       ": not valid YAML: the parser finds more documents than "
                                       "the text has lines");
    }
    return YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source_ + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

Status YamlReader::Error(const YAML::Node& node, std::string_view path,
                         std::string_view what) const {
  std::string where = source_;
  const YAML::Mark mark = node.Mark();
  if (mark.line >= 0)
    where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  return Status::InvalidArgument(where + ": field " + std::string(path) + ": " + std::string(what));
}

Status YamlReader::ExpectMap(const YAML::Node& node, std::string_view path) const {
  if (!node.IsMap()) return Error(node, path, "expected a mapping");
  return Status::Ok();
}

Status YamlReader::ExpectList(const YAML::Node& node, std::string_view path) const {
  if (!node.IsSequence()) return Error(node, path, "expected a list");
  return Status::Ok();
}

Status YamlReader::CheckKeys(const YAML::Node& map, std::string_view path,
                             std::initializer_list<std::string_view> allowed) const {
  CHAMBER_RETURN_IF_ERROR(ExpectMap(map, path));
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return Error(kv.first, path, "keys must be plain strings");
    const std::string& key = kv.first.Scalar();
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string known;
      for (std::string_view a : allowed) known += (known.empty() ? "" : ", ") + std::string(a);
      return Error(kv.first, std::string(path).empty() ? key : std::string(path) + "." + key,
                   "unknown field (known: " + known + ")");
    }
  }
  return Status::Ok();
}

Result<std::string> YamlReader::String(const YAML::Node& node, std::string_view path) const {
  if (!node.IsScalar()) return Error(node, path, "expected a string");
  return node.Scalar();
}

Result<int64_t> YamlReader::Int(const YAML::Node& node, std::string_view path) const {
  if (!node.IsScalar()) return Error(node, path, "expected an integer");
  const std::string& s = node.Scalar();
  int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || ptr != end)
    return Error(node, path, "expected an integer, got \"" + s + "\"");
  return v;
}

Result<double> YamlReader::Double(const YAML::Node& node, std::string_view path) const {
  if (!node.IsScalar()) return Error(node, path, "expected a number");
  const std::string& s = node.Scalar();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
    return Error(node, path, "expected a number, got \"" + s + "\"");
  return v;
}

Result<bool> YamlReader::Bool(const YAML::Node& node, std::string_view path) const {
  if (!node.IsScalar()) return Error(node, path, "expected true or false");
  const std::string& s = node.Scalar();
  if (s == "true") return true;
  if (s == "false") return false;
  return Error(node, path, "expected true or false, got \"" + s + "\"");
}

Result<Duration> YamlReader::Dur(const YAML::Node& node, std::string_view path) const {
  if (!node.IsScalar()) return Error(node, path, "expected a duration");
  auto d = ParseDuration(node.Scalar());
  if (!d.ok()) return Error(node, path, d.status().message());
  return *d;
}

Result<int64_t> YamlReader::CpuMilli(const YAML::Node& node, std::string_view path) const {
  if (!node.IsScalar()) return Error(node, path, "expected a CPU quantity");
  auto v = ParseCpuMilli(node.Scalar());
  if (!v.ok()) return Error(node, path, v.status().message());
  return *v;
}

Result<int64_t> YamlReader::Bytes(const YAML::Node& node, std::string_view path) const {
  if (!node.IsScalar()) return Error(node, path, "expected a memory quantity");
  auto v = ParseBytes(node.Scalar());
  if (!v.ok()) return Error(node, path, v.status().message());
  return *v;
}

Result<std::vector<std::pair<std::string, std::string>>> YamlReader::StringMap(
    const YAML::Node& node, std::string_view path) const {
  CHAMBER_RETURN_IF_ERROR(ExpectMap(node, path));
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    CHAMBER_ASSIGN_OR_RETURN(std::string value, String(kv.second, std::string(path) + "." + key));
    out.emplace_back(key, std::move(value));
  }
  return out;
}

}  // namespace chamber::core::io
