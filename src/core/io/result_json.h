// A cycle's decisions as JSON, with workloads and nodes named (`chamber schedule -o json`).
#pragma once

#include <nlohmann/json.hpp>

#include "core/decision.h"
#include "core/model.h"

namespace chamber::core::io {

nlohmann::json CycleResultToJson(const Snapshot& snapshot, const CycleResult& result);

// An amount of GPUs in thousandths (Resource::kGpu) as JSON: an integer when whole ("8"), else
// a number of GPUs ("0.5").
nlohmann::json GpuAmountJson(int64_t milli);

}  // namespace chamber::core::io
