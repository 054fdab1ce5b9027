#include "common/yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include "common/quantity.h"
#include "common/time.h"

namespace chamber {
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

// YAML allows no C0 control character but tab, line feed and carriage return, nor DEL (the
// spec's c-printable). yaml-cpp reads some of them, such as NUL inside a string, as a value no
// writer can give back; they are refused where they stand.
Status CheckPrintable(std::string_view text, const std::string& source) {
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    } else if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      return Status::InvalidArgument(source + ":" + std::to_string(line) + ":" +
                                     std::to_string(i - line_start + 1) + ": control character 0x" +
                                     kHex[c >> 4] + kHex[c & 15] + " is not allowed in YAML");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<YAML::Node> YamlReader::Load(std::string_view text) const {
  CHAMBER_RETURN_IF_ERROR(CheckPrintable(text, source_));
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source_ + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

Result<std::vector<YAML::Node>> YamlReader::LoadAll(std::string_view text) const {
  CHAMBER_RETURN_IF_ERROR(CheckPrintable(text, source_));
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

Result<std::chrono::milliseconds> YamlReader::Dur(const YAML::Node& node,
                                                  std::string_view path) const {
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

Result<int64_t> YamlReader::GpuMilli(const YAML::Node& node, std::string_view path,
                                     int64_t max_gpus) const {
  if (!node.IsScalar()) return Error(node, path, "expected an amount of GPUs");
  auto v = ParseGpuMilli(node.Scalar(), max_gpus);
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

}  // namespace chamber
