// A cycle's decisions as JSON, with workloads and nodes named (`chamber schedule -o json`).
#pragma once

#include <nlohmann/json.hpp>

#include "core/decision.h"
#include "core/model.h"

namespace chamber::core::io {

nlohmann::json CycleResultToJson(const Snapshot& snapshot, const CycleResult& result);

}  // namespace chamber::core::io
