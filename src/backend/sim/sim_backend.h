// The simulated cluster behind `chamber demo`: the steppable simulator (sim::SimCluster) with
// external scheduling, so the daemon's own loop runs the engine as it would on a real cluster.
// Each Refresh() moves simulated time forward by `step`. GPU activity comes from the simulated
// workloads: each job has a deterministic activity level (most train hard, some sit idle the way
// forgotten notebooks do), with per-GPU jitter; unallocated GPUs read zero.
//
// A GPU fault (random, or FailGpu) gets a deterministic kind with the evidence a real agent
// would report for it (SimulatedFault): an Xid 79, a double-bit ECC burst (Xid 48 with the counts
// and a pending row remap), a GPU close to its shutdown temperature, or an NVLink error (Xid 74
// with the link's counters; SXM GPUs only). Observe() gives it with the workloads requeued off it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/backend.h"
#include "sim/cluster_spec.h"
#include "sim/policy.h"
#include "sim/simulator.h"
#include "sim/trace/trace.h"

namespace chamber::backend {

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

class SimulatedBackend : public daemon::ClusterBackend {
 public:
  static Result<std::unique_ptr<SimulatedBackend>> Create(SimulatedBackendOptions options);

  std::string_view mode() const override { return "demo"; }
  bool simulated_time() const override { return true; }
  Result<const core::Snapshot*> Refresh() override;
  Status Apply(const core::CycleResult& result) override;
  daemon::Observation Observe() override;
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
  // The fault a GPU that failed at `at_ms` (Unix ms) shows; `nvlink`: the GPU has NVLink.
  static daemon::GpuFault SimulatedFault(const std::string& uuid, int64_t at_ms, bool nvlink,
                                         uint64_t seed);

 private:
  explicit SimulatedBackend(SimulatedBackendOptions options);

  SimulatedBackendOptions options_;
  sim::SimOptions sim_options_;
  sim::SimPolicy policy_;
  std::vector<fleet::PoolInput> pools_;
  std::vector<int32_t> node_pool_;
  // Per node, its GPUs in MIG mode with their devices, as an agent would list them (the demo
  // has no pods, so no device names its holder).
  std::vector<std::vector<fleet::GpuInput>> mig_gpus_;
  std::unique_ptr<sim::SimCluster> cluster_;
  bool started_ = false;
  // The faults of the GPUs unhealthy now, by UUID, and the workloads requeued off each.
  struct Fault {
    daemon::GpuFault fault;
    std::vector<std::string> requeued;
    int64_t requeued_count = 0;
  };
  std::unordered_map<std::string, Fault> faults_;
};

}  // namespace chamber::backend
