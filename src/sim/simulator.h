// The discrete-event simulator: replays a trace on a cluster through the engine, one policy at a
// time. Events (submit, finish, end of a preemption grace period, GPU failure and repair) change
// the simulated cluster; after a change, the next cycle boundary runs an engine cycle over the
// current snapshot and applies its decisions. Deterministic for a given seed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "sim/policy.h"
#include "sim/trace/trace.h"

namespace chamber::sim {

struct SimOptions {
  std::vector<core::Queue> queues;  // empty: one unlimited queue named "default"
  Duration checkpoint_interval{std::chrono::minutes(30)};  // 0: jobs never checkpoint
  Duration restart_overhead{std::chrono::seconds(60)};     // added when work resumes
  Duration recheck_interval{std::chrono::seconds(60)};     // LAS: re-rank this often
  double gpu_mtbf_hours = 0;                               // per GPU; 0: no failures
  Duration repair_time{std::chrono::hours(4)};
  uint64_t seed = 1;
  Duration horizon{0};  // stop here; 0: when every job has finished
  int32_t series_points = 400;
  // Each cycle loads the whole snapshot afresh (Engine::Schedule) instead of the state the
  // cluster keeps between cycles (EngineSession). The same decisions, more slowly: for
  // comparing the two.
  bool fresh_cycles = false;
  // The MIG profiles the cluster's nodes index (ClusterSpec::MigProfiles()), and its GPUs in
  // MIG mode, which its nodes list as MIG devices and capacity counts.
  std::vector<core::MigResource> mig_profiles;
  int64_t mig_gpus = 0;
};

enum class EventKind { kSubmit, kStart, kPreempt, kResume, kFinish, kFail };
std::string_view EventKindName(EventKind k);

struct SimEvent {
  Time time{0};
  const TraceJob* job = nullptr;
  EventKind kind = EventKind::kSubmit;
  std::vector<core::PodPlacement> placements;  // for start and resume
  std::string reason;                          // for preempt and fail
  const TraceJob* preemptor = nullptr;         // for preempt
};
using EventSink = std::function<void(const SimEvent&)>;

struct Summary {
  int64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p99 = 0;
};
Summary Summarize(std::vector<double> values);  // nearest-rank percentiles

struct QueueMetrics {
  std::string name;
  double gpu_hours = 0;  // allocated over the run
  double share = 0;      // of all allocated GPU-hours
  // The queue's quota over the quotas of all queues the trace's jobs use; an equal split when
  // none of them has quota. 0 for a queue without quota beside ones with it: such a queue is
  // left out of Jain's index.
  double entitlement = 0;
};

struct SeriesPoint {
  double hours = 0;
  double allocated_gpus = 0;  // averaged over the point's interval
  double waiting_jobs = 0;
  std::vector<double> queue_gpus;
};

struct SimMetrics {
  std::string policy;
  int64_t capacity_gpus = 0;
  int64_t jobs = 0;
  int64_t finished = 0;
  int64_t unfinished = 0;  // still waiting or running when the run stopped
  double makespan_hours = 0;
  double allocation = 0;                // allocated GPU-hours over capacity GPU-hours
  double allocation_while_waiting = 0;  // the same, over the time some job waited
  double idle_gpu_hours_while_queued = 0;
  Summary jct_hours;
  Summary wait_hours;
  std::map<std::string, Summary> jct_by_priority;  // "reserved", "elastic"
  std::map<std::string, Summary> wait_by_priority;
  std::map<std::string, Summary> jct_by_gang;  // "1 gpu", "2-8 gpu", "9-64 gpu", "65+ gpu"
  std::map<std::string, Summary> wait_by_gang;
  std::vector<QueueMetrics> queues;
  double jain_index = 1;  // over queues' share / entitlement
  int64_t preemptions = 0;
  int64_t gpu_failures = 0;
  double gpu_hours_lost_preemption = 0;
  double gpu_hours_lost_failures = 0;
  int64_t cycles = 0;
  Summary cycle_ms;  // scheduler CPU time per cycle
  double run_seconds = 0;
  int64_t fractional_jobs = 0;  // jobs whose pods ask for a share of one GPU
  std::vector<SeriesPoint> series;
};

namespace internal {
class Sim;
}

// The simulated cluster as a steppable object: Simulate() runs one from start to finish, and
// the demo's backend steps one in accelerated time. With Scheduling::kInternal the cluster runs
// its own engine cycles at cycle boundaries (as Simulate does); with kExternal the caller
// schedules: it takes PrepareCycle()'s snapshot to an engine and hands the result to
// ApplyCycle(), as the daemon does with a real cluster.
class SimCluster {
 public:
  enum class Scheduling { kInternal, kExternal };

  // `nodes` and `events` are copied; `trace`, `policy` and `options` must outlive the cluster.
  static Result<std::unique_ptr<SimCluster>> Create(const std::vector<core::Node>& nodes,
                                                    const Trace& trace, const SimPolicy& policy,
                                                    const SimOptions& options,
                                                    const EventSink& events = {},
                                                    Scheduling scheduling = Scheduling::kInternal);
  ~SimCluster();
  SimCluster(const SimCluster&) = delete;
  SimCluster& operator=(const SimCluster&) = delete;

  // Processes every event up to and including `t` and moves the clock there (never backwards).
  void AdvanceTo(Time t);
  Time now() const;

  // External scheduling: the snapshot as of now(), and applying the engine's result for it.
  const core::Snapshot& PrepareCycle();
  void ApplyCycle(const core::CycleResult& result);

  // The current state. Workload i of the snapshot belongs to JobOf(i).
  const core::Snapshot& snapshot() const;
  const TraceJob& JobOf(size_t workload) const;
  // GPU-equivalents the workload holds now, in thousandths (0 unless running or preempting): a
  // share of one GPU counts its thousandths, a whole GPU 1,000.
  int64_t GpuMilliHeld(size_t workload) const;

  // Marks a GPU unhealthy now; it is repaired after `repair_after`. False if it already is.
  bool FailGpu(size_t node, size_t gpu, Duration repair_after);
  // Cordons or uncordons a node.
  void SetUnschedulable(size_t node, bool unschedulable);

  // Metrics up to now(), as Simulate reports them.
  SimMetrics Metrics();

 private:
  explicit SimCluster(std::unique_ptr<internal::Sim> sim);
  std::unique_ptr<internal::Sim> sim_;
};

// Runs one policy over the trace. Jobs naming a queue that `options.queues` lacks are an error.
Result<SimMetrics> Simulate(const std::vector<core::Node>& nodes, const Trace& trace,
                            const SimPolicy& policy, const SimOptions& options,
                            const EventSink& events = {},
                            const std::function<void(double)>& progress = {});

}  // namespace chamber::sim
