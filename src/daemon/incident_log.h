// IncidentLog: the GPUs that went out of service, while they are out and after, for the fleet
// view. A GPU the snapshot marks unhealthy opens an incident, described by what the backend
// knows of its fault (backend.h, GpuFault: the health rule, the readings, what was done) or, for
// a GPU marked unhealthy by hand or by an earlier leader, by what was done alone; it is resolved
// when the GPU is healthy again. The log keeps its open incidents and the latest resolved ones.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/gpu_evidence.h"
#include "core/model.h"
#include "daemon/backend.h"

namespace chamber::daemon {

// A GPU that failed its health checks, while it lasts and after.
struct Incident {
  int64_t time_ms = 0;
  std::string node;
  int32_t gpu_index = 0;
  std::string uuid;
  std::string kind = "gpu_unhealthy";
  std::string cause;     // the health rule; empty when the backend does not know the fault
  std::string severity;  // "unhealthy", "fatal"; empty when unknown
  std::string message;
  EvidenceList evidence;
  std::optional<int64_t> resolved_ms;
};

class IncidentLog {
 public:
  // Keeps at most about `max_kept` incidents (open ones are never dropped).
  explicit IncidentLog(size_t max_kept) : max_kept_(max_kept) {}

  // One cycle's view: opens an incident for each GPU of `snapshot` newly unhealthy, describes the
  // open ones with `faults` (by GPU UUID), resolves those whose GPU is healthy again.
  void Observe(const core::Snapshot& snapshot,
               const std::unordered_map<std::string, GpuFault>& faults, int64_t now);

  // The latest `n`, newest first.
  std::vector<Incident> Latest(size_t n) const;

 private:
  size_t max_kept_;
  std::map<std::string, size_t> open_;  // uuid -> index in incidents_
  std::vector<Incident> incidents_;     // oldest first
};

}  // namespace chamber::daemon
