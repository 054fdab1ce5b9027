// The agent's outputs, rendered from its state: the JSON report (printed by --once, served on
// /v1/report and pushed to chamberd; schema in docs/agent.md) and the Prometheus page.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/gpu_types.h"
#include "agent/health.h"
#include "agent/pod_resources.h"

namespace chamber::agent {

// Everything one report holds.
struct AgentSnapshot {
  std::string node;
  double time = 0;  // unix seconds
  Inventory inventory;
  std::vector<GpuSample> samples;  // the latest per GPU
  std::vector<GpuIncident> open_incidents;
  std::vector<GpuIncident> recently_closed;
  std::map<std::string, Severity> gpu_severity;  // by UUID
  std::map<std::string, std::string> labels;
  PodAttribution pod_attribution;
  // (gpu index, xid) -> events seen since the agent started.
  std::map<std::pair<int, unsigned>, std::uint64_t> xid_counts;
  std::uint64_t push_success = 0;
  std::uint64_t push_failure = 0;
};

// The report schema's version, "chamber.io/agent-report/v1".
inline constexpr const char* kReportKind = "chamber.io/agent-report/v1";

nlohmann::json InventoryJson(const Inventory& inventory);
nlohmann::json SampleJson(const GpuSample& sample);
nlohmann::json IncidentJson(const GpuIncident& incident);
nlohmann::json ReportJson(const AgentSnapshot& snapshot);

// The /metrics page (Prometheus text format).
std::string RenderMetrics(const AgentSnapshot& snapshot);

}  // namespace chamber::agent
