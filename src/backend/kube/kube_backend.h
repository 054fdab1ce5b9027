// chamberd's Kubernetes backend: informers on Nodes, Pods, Jobs, Queues, PriorityClasses,
// Namespaces and the top-level kinds of workload_kinds.h the cluster serves (JobSets) keep a
// cache; Refresh() turns the cache into the engine's snapshot
// (snapshot_builder.h) and Apply() carries the decisions back through the API:
//
//   bind     pods/binding for every pod of the gang, with the pod's UID and resourceVersion as
//            preconditions and the GPU slots as the binding's annotation (the API server copies
//            it onto the pod). If any bind of a gang fails, the pods already bound are deleted
//            (a Job recreates them; the gang is tried again whole) and a Warning Event says why;
//            unless leadership was lost meanwhile: then they stay bound for the next leader.
//   preempt  a Job (or a top-level object, such as a JobSet) is suspended (spec.suspend, with
//   `chamber.io/preempted-at` and the
//            preemption history as annotations, the Job's UID and resourceVersion as
//            preconditions) and its pods are deleted with the checkpoint grace period; bare pods
//            are evicted through the eviction API with that grace period (a PodDisruptionBudget
//            that forbids it is retried next cycle).
//   resume   a Job or top-level object Chamber suspended is unsuspended; its new pods are bound as
//   they appear. pending  every pending pod gets PodScheduled=False with the engine's reason and
//   message
//            (reason `Unschedulable` when no node fits, as the cluster autoscaler expects).
//   status   each Queue's status (allocated, fair share, borrowed, lent, workloads, Valid).
//
// A bind the API accepted is assumed until the pod informer shows it (the build reports that),
// or until `assume_timeout`, so the next cycle does not give those GPUs away. Every write stops
// as soon as `options.writes_allowed` turns false (leadership lost).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/kube/gpu_pricing.h"
#include "backend/kube/gpu_reservations.h"
#include "backend/kube/snapshot_builder.h"
#include "core/fair_share.h"
#include "daemon/backend.h"
#include "kube/client.h"
#include "kube/informer.h"

namespace chamber::backend {

// What a node's chamber-agent last measured on one GPU (its reports to chamberd), for the fleet
// model's "used" and "allocated but idle".
struct AgentGpuSample {
  int index = 0;     // NVML's index on the node
  std::string uuid;  // "GPU-..."
  daemon::GpuSample sample;
  // GPU memory each pod's processes hold on it, by pod UID (the sum over its processes whose
  // memory the driver tells); empty when the agent attributes none.
  std::vector<std::pair<std::string, int64_t>> pod_memory;
};
// By node name; only nodes whose agent reports now (a stale agent's numbers are not used).
using AgentGpuUsage =
    std::unordered_map<std::string, std::shared_ptr<const std::vector<AgentGpuSample>>>;

// Why the health controller fenced a GPU: by node name, (GPU index, fault).
using GpuFaultsByNode =
    std::unordered_map<std::string, std::vector<std::pair<int, daemon::GpuFault>>>;

// A workload preempted because it held a GPU that turned unhealthy (reason HardwareFault).
struct FaultRequeue {
  std::string node;
  int gpu_index = 0;
  std::string workload;  // "namespace/name"
};

struct KubeBackendOptions {
  std::string scheduler_name = kDefaultSchedulerName;
  std::string gpu_resource = kGpuResource;
  int32_t writers = 16;                              // parallel API writes within a cycle
  std::chrono::milliseconds assume_timeout{30'000};  // how long an unseen bind is assumed
  // A gang rolled back after a failed bind is tried again this long after (docs/scheduling.md,
  // "When a bind fails"), doubled for each further rollback in a row, up to the most.
  std::chrono::milliseconds bind_backoff{5'000};
  std::chrono::milliseconds bind_backoff_max{300'000};
  int32_t max_condition_writes_per_cycle = 500;         // PodScheduled updates (binds go first)
  std::chrono::milliseconds condition_refresh{10'000};  // a changed message waits this long
  bool write_events = true;
  // Events go out from a queue of their own, so that a cycle that binds thousands of pods does
  // not wait for their Events; beyond this many waiting, new ones are dropped (and counted).
  size_t max_queued_events = 20'000;
  int32_t event_writers = 4;
  // How often a thread of its own derives the objects that changed (Prepare()), so that cycles,
  // and the cycle after a long Apply(), do not; 0: none.
  std::chrono::milliseconds prepare_every{250};
  std::function<bool()> writes_allowed;  // empty: always
  // The Lease this replica leads by ("<namespace>/<name>") and its term there
  // (kube::LeaderElector::term()), stamped on every bind (keys::kLeaderLease, kLeaderTerm) for
  // the API server's fence to check; empty: no stamp (no leader election).
  std::string leader_lease, leader_term;
  // Prices of the nodes' GPUs, and the fleet pools they make (gpu_pricing.h).
  PricingConfig pricing;
  // fairShare.usageHalfLife: each queue's decayed GPU-hours are kept, handed to the engine and
  // stored in the Queue's status.decayedUsage at most this often, where the next leader finds
  // them. 0: none.
  core::Duration usage_half_life{0};
  std::chrono::milliseconds usage_write_every{60'000};
  // How often a kind of WorkloadKinds() the cluster does not serve yet (its CRD not installed)
  // is looked for again; the first look is at Create().
  std::chrono::milliseconds kind_discovery_every{60'000};
  // A share whose pod holds more GPU memory than it asked for (chamber.io/gpu-memory), as its
  // node's agent measures the pod's processes, for this long in a row is deleted; 0: shown and
  // logged, never deleted (docs/sharing.md, "Memory a share holds").
  std::chrono::milliseconds share_memory_grace{60'000};
  // Reservation pods (docs/sharing.md, "Reservation pods"), made in this namespace (chamberd's
  // own); empty: none are made, and shares are bound without them.
  std::string reservation_namespace;
  std::string reservation_image = "registry.k8s.io/pause:3.10";
  ReservationOptions reservations;
};

// Counters since start, for metrics and tests.
struct KubeBackendStats {
  int64_t binds = 0, bind_failures = 0, rollbacks = 0;
  int64_t suspends = 0, resumes = 0, evictions = 0, eviction_blocked = 0;
  int64_t condition_writes = 0, queue_status_writes = 0, write_errors = 0, events_dropped = 0;
  int64_t share_memory_evictions = 0;  // shares deleted for holding more memory than they asked
  // Bind tries the leader fence refused while this replica led (tried again): the API server
  // had not seen its term's Lease yet.
  int64_t fence_refusals = 0;
  // Binds refused because the pod had changed since the snapshot (its controller wrote a label
  // or annotation), tried again with its new version.
  int64_t changed_pod_rebinds = 0;
  // Reservation pods made, and deleted by reason (as kRemovalReasons orders them).
  int64_t reservations_made = 0;
  std::array<int64_t, std::size(kRemovalReasons)> reservations_deleted{};
};

// The counters and the reservation pods seen now, as Observation::metrics serves them.
std::vector<daemon::BackendMetric> BackendMetrics(const KubeBackendStats& stats,
                                                  const std::vector<GpuReservation>& reservations);

// Fills the observation's `workload_pods` and `bare_pods` from a build's sources.
void ListWorkloadPods(const BuiltSnapshot& built, daemon::Observation& o);

class KubeBackend : public daemon::ClusterBackend {
 public:
  // Starts the informers and waits until they have synced (or `sync_timeout` passes).
  static Result<std::unique_ptr<KubeBackend>> Create(
      kube::Client* client, KubeBackendOptions options,
      std::chrono::milliseconds sync_timeout = std::chrono::seconds(60));
  ~KubeBackend() override;

  std::string_view mode() const override { return "cluster"; }
  bool simulated_time() const override { return false; }
  Result<const core::Snapshot*> Refresh() override;
  // Derives, from the objects that changed since the last Refresh(), what the next one needs,
  // so that the cycle does not have to, and frees the snapshot before the last. Create() calls
  // it once, and a thread every `prepare_every`. Returns the objects derived.
  size_t Prepare();
  // Frees the snapshot before the last (lent to the last build), outside the build lock. The
  // preparer thread calls it as soon as a Refresh() is done, so that the snapshot is gone
  // before the cycle builds its fleet state (the cycle's peak memory) and not on its path.
  void ReleaseRetired();
  Status Apply(const core::CycleResult& result) override;
  // The pods whose bind the API server accepted and the pod informer has not shown yet, as
  // "namespace/name", sorted: they hold their GPUs in the next build whatever the informer says.
  // Between cycles only (the cycle thread changes them).
  std::vector<std::string> AssumedPods() const;
  daemon::Observation Observe() override;
  Status SetSchedulable(std::string_view node, bool schedulable) override;
  // Where Observe() reads the GPUs' utilization and memory use; without one (or for a GPU its
  // node's agent does not report) they read 0. Set before the daemon runs.
  void SetGpuUsageSource(std::function<AgentGpuUsage()> source) { gpu_usage_ = std::move(source); }
  // Where Refresh() reads which GPUs the device plugin gave which pods (the agents'
  // pod-resources reports), which win over a pod's chamber.io/gpu-indices. Set before the daemon
  // runs.
  void SetDeviceAssignmentSource(std::function<DeviceAssignments()> source) {
    device_source_ = std::move(source);
  }
  // Where Observe() reads why unhealthy GPUs are fenced (Observation::gpu_faults), and where
  // Apply() tells which workloads it requeued off them. Set before the daemon runs.
  void SetGpuFaultSource(std::function<GpuFaultsByNode()> source) {
    gpu_faults_ = std::move(source);
  }
  void SetFaultRequeueSink(std::function<void(const std::vector<FaultRequeue>&)> sink) {
    fault_requeues_ = std::move(sink);
  }

  KubeBackendStats stats() const;
  // Durations of the last Refresh() (cache to snapshot) and Apply() (API writes), ms; and the
  // CPU time Refresh() took.
  double last_refresh_ms() const { return last_refresh_ms_; }
  double last_refresh_cpu_ms() const { return last_refresh_cpu_ms_; }
  // Objects the last Refresh() derived itself (the others were cached or prepared).
  size_t last_derived() const { return last_derived_; }
  // Workloads the last Refresh moved over from the snapshot before it (unchanged bare pods).
  size_t last_reused() const { return last_reused_; }
  double last_apply_ms() const { return last_apply_ms_; }
  // Problems met reading the cluster in the last Refresh().
  const std::vector<std::string>& problems() const { return built_.problems; }
  const BuiltSnapshot& built() const { return built_; }
  // The Nodes as the informer has them (the health controller reads them); thread-safe.
  std::shared_ptr<const kube::Node> NodeNamed(const std::string& name) const;
  std::vector<std::shared_ptr<const kube::Node>> AllNodes() const;

 private:
  KubeBackend(kube::Client* client, KubeBackendOptions options);
  bool WritesAllowed() const { return !options_.writes_allowed || options_.writes_allowed(); }
  void ApplyBinds(const core::CycleResult& result);
  // Suspends a Job (or top-level object) whose gang is rolled back (keys::kRolledBackAt); false
  // when it cannot.
  bool SuspendForRollback(const WorkloadSource& src);
  // The Job controlling `pod` (batch/v1), or null.
  static const kube::OwnerReference* JobController(const kube::Pod& pod);
  // Suspends the Jobs through which a top-level object (a JobSet) owns `pods`, as its controller
  // will once it sees the object suspended: the Job controller counts a pod deleted under a
  // running Job as a failure, and a Job out of backoff fails its JobSet. A TrainJob's JobSet
  // (WorkloadSource::part) is suspended before its Jobs, as the Trainer will.
  void SuspendPartJobs(const WorkloadSource& src,
                       const std::vector<std::shared_ptr<const kube::Pod>>& pods);
  // Whether the API server holds the pod (this very object, by uid) bound to `node`; empty when
  // it cannot be asked.
  std::optional<bool> BoundState(const PodRef& pod, const std::string& node) const;
  void ApplyPreemptions(const core::CycleResult& result);
  void ApplyResumes(const core::CycleResult& result);
  void ApplyPending(const core::CycleResult& result);
  // An upstream PodGroup's condition `type`, as kube-scheduler writes it:
  // `PodGroupInitiallyScheduled` True once its gang is bound, else False with the pods' pending
  // reason; `DisruptionTarget` True when its pods are evicted by a preemption. True is never
  // made False again. Written when it changes; a no-op for any other source.
  void WritePodGroupCondition(const WorkloadSource& src, const char* condition_type, bool value,
                              const std::string& reason, const std::string& message);
  void ApplyQueueStatus(const core::CycleResult& result);
  // The decayedUsage to write for `queue` (a queue, or "<queue>/<model>"): `written`, the one
  // written last, while it is younger than usage_write_every; else the figure of `now`.
  kube::Json UsageToWrite(const std::string& queue, const core::DecayedUsage::Entry& now,
                          const kube::Json* written) const;
  void Event(const WorkloadSource& about, const std::string& reason, const std::string& message,
             bool warning = false);
  void Event(kube::Json involved, const std::string& reason, const std::string& message,
             bool warning);
  // What the agents measure of each running share's pod (Observation::share_memory), and the
  // overruns it finds, kept in overruns_ across cycles.
  std::unordered_map<std::string, daemon::Observation::ShareMemory> MeasureShares(
      const AgentGpuUsage& usage);
  // Deletes the pods of overruns that have lasted share_memory_grace.
  void EvictShareOverruns();
  void EventWriter(std::stop_token stop);
  void CountError(const Status& s, const std::string& what);
  std::vector<std::shared_ptr<const kube::Pod>> PodsOf(const WorkloadSource& src) const;

  kube::Client* client_;
  KubeBackendOptions options_;
  std::unique_ptr<kube::Informer<kube::Node>> nodes_;
  std::unique_ptr<kube::Informer<kube::Pod>> pods_;
  std::unique_ptr<kube::Informer<kube::Job>> jobs_;
  // One per kind of WorkloadKinds(), per version of PodGroupTypes() and for 1.35's Workloads
  // (WorkloadV1alpha1Type()); the informer is started once the cluster serves the kind (of
  // PodGroups, only the newest version served).
  struct KindInformer {
    const kube::ResourceType* type = nullptr;
    const WorkloadKind* kind = nullptr;  // null: PodGroups, or 1.35's Workloads
    std::unique_ptr<kube::Informer<kube::Object>> informer;
    bool warned = false;  // a look that failed was logged as a warning (later ones are debug)
  };
  std::vector<KindInformer> kinds_;  // changed under build_mu_ only
  int64_t kinds_checked_ms_ = 0;
  // Starts the informers of the kinds the cluster serves now; returns those started.
  std::vector<const KindInformer*> DiscoverKinds();
  std::unique_ptr<kube::Informer<kube::Object>> queues_;
  std::unique_ptr<kube::Informer<kube::PriorityClass>> priority_classes_;
  std::unique_ptr<kube::Informer<kube::Namespace>> namespaces_;

  BuiltSnapshot built_;
  ClusterObjects ListObjects() const;  // from the informers' caches; no queues
  BuildOptions BuildOptionsAt(int64_t now_ms);
  std::mutex build_mu_;     // Refresh() and Prepare()
  BuiltSnapshot retired_;   // the snapshot before built_, until Prepare() frees it
  BuildCache build_cache_;  // what Refresh() and Prepare() derived from objects still unchanged
  AssumedBinds assumed_;
  AssumedSuspends suspending_;  // gangs rolled back, suspended until the informer shows it
  // Gangs in bind backoff, by workload name: this leader's memory, not the cluster's.
  struct BindBackoff {
    int64_t retry_at_ms = 0;
    int32_t rollbacks = 0;
    std::string failure;
  };
  std::unordered_map<std::string, BindBackoff> bind_backoff_;
  // Reservation pods without a share since (by UID), for PlanReservations.
  std::unordered_map<std::string, int64_t> reservation_idle_;
  // Reservation pods made, by UID: their node and when to stop waiting for the informer to show
  // them (until then they count as made, so a lagging informer never gets a node a second one).
  struct MadeReservation {
    std::string node;
    int64_t expires_ms = 0;
  };
  std::unordered_map<std::string, MadeReservation> made_reservations_;
  // Creates and deletes the reservation pods `plan` names.
  void ApplyReservations(const ReservationPlan& plan);
  // Starts, or doubles, the bind backoff of `workload` after a rollback; returns it.
  const BindBackoff& BackOff(const std::string& workload, const std::string& failure);
  std::map<std::string, std::string> queue_errors_;         // queue -> decode error
  std::map<std::string, int64_t> queue_generation_;         // queue -> metadata.generation
  std::map<std::string, kube::Json> queue_status_written_;  // queue -> last status written
  core::DecayedUsage usage_{core::Duration(0)};             // fairShare.usageHalfLife
  bool usage_restored_ = false;  // read the Queues' status.decayedUsage once, at the start
  // queue (or "<queue>/<model>") -> what time the decayedUsage written last was as of
  std::map<std::string, int64_t> usage_written_ms_;
  struct ConditionWritten {
    std::string reason, message;
    int64_t at_ms = 0;
  };
  std::map<std::string, ConditionWritten> conditions_written_;  // by pod UID
  // PodGroups' conditions as last written ("True", or "False:<reason>"), by "<uid>/<type>".
  std::map<std::string, std::string> pod_group_conditions_;
  size_t pod_group_conditions_kept_ = 0;  // entries after the last pruning
  std::vector<std::vector<daemon::GpuSample>> samples_;
  // Shares holding more GPU memory than they asked for, by pod UID; an entry lives while every
  // cycle's measurement finds its pod over.
  struct ShareOverrun {
    std::string namespace_name, name;
    int64_t since_ms = 0;
    int64_t used_bytes = 0, asked_bytes = 0;
    bool deleted = false;
  };
  std::unordered_map<std::string, ShareOverrun> overruns_;
  // The fleet pools so far: a pool keeps its index after its last node goes (gpu_pricing.h).
  std::vector<fleet::PoolInput> pools_;
  std::function<AgentGpuUsage()> gpu_usage_;
  std::function<DeviceAssignments()> device_source_;
  DeviceAssignments devices_;  // the last build's, read from device_source_
  std::function<GpuFaultsByNode()> gpu_faults_;
  std::function<void(const std::vector<FaultRequeue>&)> fault_requeues_;

  double last_refresh_ms_ = 0, last_refresh_cpu_ms_ = 0, last_apply_ms_ = 0;
  size_t last_derived_ = 0;
  size_t last_reused_ = 0;

  std::mutex events_mu_;
  std::condition_variable_any events_cv_;
  std::deque<kube::EventSpec> events_;
  std::vector<std::jthread> event_writers_;  // last: they stop first
  std::condition_variable_any prepare_cv_;
  std::atomic<bool> release_retired_{false};  // a Refresh() lent the retired snapshot
  std::jthread preparer_;
  mutable std::mutex stats_mu_;
  KubeBackendStats stats_;
};

// Runs fn(0..n-1) on up to `threads` threads and waits for all.
void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace chamber::backend
