// The cluster `chamber demo` simulates: three pools of different GPU models and pricing, four
// teams with quotas, and a synthetic week of work calibrated to production traces (Helios). A
// scale grows or shrinks all of it in proportion, so the same fleet can be shown at 10,000 GPUs.
#pragma once

#include <cstdint>

#include "backend/sim/sim_backend.h"

namespace chamber::backend {

struct DemoClusterOptions {
  uint64_t seed = 1;
  core::Duration step{std::chrono::seconds(30)};  // simulated time per cycle
  int64_t start_unix_ms = 0;
  // Multiplies nodes (each pool's count rounded, at least one node), quotas and jobs; 1 is the
  // 264-GPU cluster below. DemoScaleForGpus() gives the scale for a number of GPUs.
  double scale = 1;
  double load = 1;              // multiplies the number of jobs
  double gpu_mtbf_hours = 200;  // per GPU: about one fault every 45 simulated minutes
};

// GPUs of the demo cluster at scale 1.
inline constexpr int64_t kDemoClusterGpus = 264;

// The scale at which the demo cluster has about `gpus` GPUs (within a node of each pool).
inline double DemoScaleForGpus(int64_t gpus) {
  return static_cast<double>(gpus) / static_cast<double>(kDemoClusterGpus);
}

// Pools at scale 1: h100 (16 nodes x 8 H100, on-demand), a100 (12 x 8 A100, reserved), l40s
// (10 x 4 L40S, spot), the last GPU of each A100 node in MIG mode (2 x 1g.10gb, a 2g.20gb and a
// 3g.40gb). Queues: llm-training, vision, recsys, research. Besides the synthetic jobs, the
// research and vision teams run notebooks on shares of L40S GPUs (a quarter or a half of one,
// for one to four hours; about 25 at once at scale 1), and the recsys and llm-training teams
// inference servers on MIG devices (two to eight hours; about 15 at once at scale 1).
SimulatedBackendOptions DemoCluster(const DemoClusterOptions& options);

}  // namespace chamber::backend
