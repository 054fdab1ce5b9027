// The scheduling policies `chamber sim` compares. Each is the one engine with other settings,
// other policy parts, or another view of the jobs; none is a second scheduler.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/config.h"
#include "core/engine.h"

namespace chamber::sim {

struct SimPolicy {
  std::string name;
  core::EngineConfig config;
  core::Policies policies;
  bool one_queue = false;         // every job goes to a single unlimited queue
  bool ignore_priority = false;   // every job gets priority 0
  bool per_pod = false;           // pods are scheduled one by one, not as a gang
  bool attained_service = false;  // priority from least attained service (Tiresias LAS)
  bool quotas = true;             // keep queue quotas and limits (false: zero quota, no limit)
};

// chamber, fifo, kube-default, drf, las, quota. `base` is the configuration given with
// --config; each policy starts from it.
Result<SimPolicy> MakePolicy(std::string_view name, const core::EngineConfig& base);
const std::vector<std::string_view>& PolicyNames();
std::string_view PolicyDescription(std::string_view name);

// Tiresias-style discretised least attained service: GPU-hours a job has run so far mapped to
// an elastic priority (fewer GPU-hours, higher priority).
int32_t AttainedServicePriority(double gpu_hours);

}  // namespace chamber::sim
