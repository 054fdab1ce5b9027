#include "common/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace chamber::prometheus {

bool ValidName(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    const bool colon = allow_colon && c == ':';
    if (!(alpha || colon || (i > 0 && digit))) return false;
  }
  return true;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

namespace {

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kCounter:
      return "counter";
    case MetricType::kUntyped:
      return "untyped";
  }
  return "untyped";
}

// HELP text escapes backslash and newline only.
std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void TextWriter::Family(std::string_view name, std::string_view help, MetricType type) {
  if (!ValidName(name)) {
    throw std::invalid_argument("invalid Prometheus metric name '" + std::string(name) + "'");
  }
  if (std::find(seen_.begin(), seen_.end(), name) != seen_.end()) {
    throw std::invalid_argument("Prometheus metric family '" + std::string(name) +
                                "' written twice");
  }
  seen_.emplace_back(name);
  family_ = std::string(name);
  out_ += "# HELP ";
  out_ += family_;
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += family_;
  out_ += ' ';
  out_ += TypeName(type);
  out_ += '\n';
}

void TextWriter::Sample(std::initializer_list<Label> labels, double value) {
  WriteSample(labels.begin(), labels.end(), value);
}

void TextWriter::Sample(const std::vector<Label>& labels, double value) {
  WriteSample(labels.data(), labels.data() + labels.size(), value);
}

void TextWriter::WriteSample(const Label* begin, const Label* end, double value) {
  if (family_.empty()) throw std::invalid_argument("Prometheus sample written before a family");
  out_ += family_;
  if (begin != end) {
    out_ += '{';
    for (const Label* l = begin; l != end; ++l) {
      if (!ValidName(l->name, /*allow_colon=*/false)) {
        throw std::invalid_argument("invalid Prometheus label name '" + std::string(l->name) +
                                    "' in " + family_);
      }
      if (l != begin) out_ += ',';
      out_ += l->name;
      out_ += "=\"";
      out_ += EscapeLabelValue(l->value);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

}  // namespace chamber::prometheus
