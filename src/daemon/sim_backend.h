// The simulated cluster behind `chamber demo`: the steppable simulator (sim::SimCluster) with
// external scheduling, so the daemon's own loop runs the engine as it would on a real cluster.
// Each Refresh() moves simulated time forward by `step`. GPU activity comes from the simulated
// workloads: each job has a deterministic activity level (most train hard, some sit idle the way
// forgotten notebooks do), with per-GPU jitter; unallocated GPUs read zero.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "daemon/backend.h"
#include "sim/cluster_spec.h"
#include "sim/policy.h"
#include "sim/simulator.h"
#include "sim/trace/trace.h"

namespace chamber::daemon {

struct SimulatedBackendOptions {
  sim::ClusterSpec cluster;
  std::vector<core::Queue> queues;
  sim::Trace trace;
  core::EngineConfig engine;
  core::Duration step{std::chrono::seconds(30)};  // simulated time per Refresh()
  double gpu_mtbf_hours = 0;                      // random GPU faults; 0: none
  core::Duration repair_time{std::chrono::minutes(45)};
  int64_t start_unix_ms = 0;  // the Unix time simulated time 0 stands for
  uint64_t seed = 1;
  double idle_job_fraction = 0.12;  // jobs that hold GPUs but barely use them
};

class SimulatedBackend : public ClusterBackend {
 public:
  static Result<std::unique_ptr<SimulatedBackend>> Create(SimulatedBackendOptions options);

  std::string_view mode() const override { return "demo"; }
  bool simulated_time() const override { return true; }
  Result<const core::Snapshot*> Refresh() override;
  Status Apply(const core::CycleResult& result) override;
  Observation Observe() override;
  Status SetSchedulable(std::string_view node, bool schedulable) override;

  // Test and demo seams.
  bool FailGpu(size_t node, size_t gpu) {
    return cluster_->FailGpu(node, gpu, options_.repair_time);
  }
  sim::SimCluster& cluster() { return *cluster_; }
  // Simulated time per Refresh() from the next one on (the demo warms up in longer steps).
  void set_step(core::Duration step) { options_.step = step; }
  // A job's activity level (0..1) before per-GPU jitter.
  double JobActivity(const std::string& job_id) const;

 private:
  explicit SimulatedBackend(SimulatedBackendOptions options);

  SimulatedBackendOptions options_;
  sim::SimOptions sim_options_;
  sim::SimPolicy policy_;
  std::vector<fleet::PoolInput> pools_;
  std::vector<int32_t> node_pool_;
  std::unique_ptr<sim::SimCluster> cluster_;
  bool started_ = false;
};

}  // namespace chamber::daemon
