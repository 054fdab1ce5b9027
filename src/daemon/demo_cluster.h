// The cluster `chamber demo` simulates: three pools of different GPU models and pricing, four
// teams with quotas, and a synthetic week of work calibrated to production traces (Helios).
#pragma once

#include <cstdint>

#include "daemon/sim_backend.h"

namespace chamber::daemon {

struct DemoClusterOptions {
  uint64_t seed = 1;
  core::Duration step{std::chrono::seconds(30)};  // simulated time per cycle
  int64_t start_unix_ms = 0;
  int32_t scale = 1;            // multiplies nodes, quotas and jobs (benchmarks use large scales)
  double load = 1;              // multiplies the number of jobs
  double gpu_mtbf_hours = 200;  // per GPU: about one fault every 45 simulated minutes
};

// Pools: h100 (16 nodes x 8 H100, on-demand), a100 (12 x 8 A100, reserved), l40s (10 x 4
// L40S, spot). Queues: llm-training, vision, recsys, research.
SimulatedBackendOptions DemoCluster(const DemoClusterOptions& options);

}  // namespace chamber::daemon
