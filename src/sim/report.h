// `chamber sim` output: a terminal table, JSON, a self-contained HTML page, and JSON Lines events.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model.h"
#include "sim/simulator.h"

namespace chamber::sim {

struct RunInfo {
  std::string trace;    // what was replayed
  std::string cluster;  // what it ran on
  int64_t skipped_lines = 0;
  int64_t fractional_jobs = 0;
};

nlohmann::json MetricsToJson(const SimMetrics& m);
nlohmann::json ReportToJson(const RunInfo& info, const std::vector<SimMetrics>& runs);
std::string ReportTable(const RunInfo& info, const std::vector<SimMetrics>& runs);
// One HTML page with inline CSS and SVG plots, no external resources (html_report.cc).
std::string ReportHtml(const RunInfo& info, const std::vector<SimMetrics>& runs);
// One event as a JSON line (no trailing newline), nodes named.
std::string EventJsonLine(const SimEvent& e, const std::string& policy,
                          const std::vector<core::Node>& nodes);

}  // namespace chamber::sim
