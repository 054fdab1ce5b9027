// A GPU health incident: one fault of one GPU, from the moment a health rule
// (common/gpu_health_rules.h) opens it until its check reads good again (docs/health.md). The
// node agent's classifier opens and closes it and puts it in its report (docs/agent.md); chamberd's
// health controller reads it back from the report and keeps its own record of it, next to what it
// did about it (health/health_controller.h, HealthIncident).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/gpu_evidence.h"
#include "common/gpu_severity.h"

namespace chamber {

struct GpuIncident {
  std::uint64_t id = 0;  // unique per agent run; chamberd's record has an id of its own
  int gpu_index = -1;
  std::string gpu_uuid;
  std::string pci_bus_id;  // the agent's; chamberd does not read it from the report
  std::string cause;       // a HealthRule id
  GpuSeverity severity = GpuSeverity::kHealthy;
  std::optional<unsigned> xid;  // incidents an Xid opened
  std::string message;
  // What opened it: the readings, or the Xid and the GPU's related readings; then the rule.
  // Empty in the reports of agents before evidence.
  EvidenceList evidence;
  double opened_at = 0;  // seconds on the clock of whoever keeps the record
  double last_seen = 0;
  std::optional<double> closed_at;  // open ones: none
  std::int64_t occurrences = 1;
};

}  // namespace chamber
