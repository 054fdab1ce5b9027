// Prometheus text exposition format (version 0.0.4), as served on /metrics by chamberd and the
// agent. One writer for every metric page, so escaping and number formatting are done once.
//
//   prometheus::TextWriter w;
//   w.Family("chamber_gpus", "GPUs by state.", prometheus::MetricType::kGauge);
//   w.Sample({{"state", "idle"}}, 12);
//   std::string body = w.Take();
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chamber::prometheus {

// The Content-Type header value for the text format.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kGauge, kCounter, kUntyped };

struct Label {
  std::string_view name;
  std::string_view value;
};

// True for names matching [a-zA-Z_:][a-zA-Z0-9_:]* (metric names) or, with allow_colon false,
// [a-zA-Z_][a-zA-Z0-9_]* (label names).
bool ValidName(std::string_view name, bool allow_colon = true);

// Escapes backslash, double quote and newline, as label values need.
std::string EscapeLabelValue(std::string_view value);

// Shortest decimal form that reads back to the same double; NaN, +Inf and -Inf as Prometheus
// spells them.
std::string FormatValue(double value);

class TextWriter {
 public:
  // Starts a metric family: writes its HELP and TYPE lines. Samples that follow belong to it.
  // A family name that is not a valid metric name, or a second family of the same name, is a
  // programming error: it throws std::invalid_argument.
  void Family(std::string_view name, std::string_view help, MetricType type);

  // One sample of the current family.
  void Sample(std::initializer_list<Label> labels, double value);
  void Sample(const std::vector<Label>& labels, double value);
  void Sample(double value) { Sample(std::initializer_list<Label>{}, value); }

  std::string Take() { return std::exchange(out_, {}); }

 private:
  void WriteSample(const Label* begin, const Label* end, double value);

  std::string out_;
  std::string family_;
  std::vector<std::string> seen_;
};

}  // namespace chamber::prometheus
