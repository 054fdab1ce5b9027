// From Kubernetes objects to the engine's snapshot. Pure: no I/O and no clock (the time comes in
// as an argument), so every rule below is unit-tested without an API server.
//
// The user contract (docs/scheduling.md):
//   - Work opts in with `spec.schedulerName: chamber` (on a pod, or a Job's pod template; a Job
//     whose pods name Chamber is Chamber's too, as the admission webhook sets it on the pods).
//   - Queue: label `chamber.io/queue` on the pod or Job (the Job's own labels first, then its
//     template's); else the namespace's `chamber.io/queue` label; else none (the workload waits
//     with reason QueueNotFound).
//   - Gangs: a batch/v1 Job is one gang of `parallelism` pods (capped by the completions still
//     to go); a top-level object of a kind in WorkloadKinds() (a JobSet) is one gang of every
//     pod its spec asks for, its Jobs' pods included, queued and suspended as one; bare pods with
//     label `chamber.io/pod-group` form one gang per namespace and group, all-or-nothing above
//     `chamber.io/min-member` (label or annotation; default all members); bare pods naming an
//     upstream PodGroup (spec.schedulingGroup.podGroupName) with a gang policy form one gang at
//     its minCount, with its queue and priority, and wait while it does not exist; so do, in
//     Kubernetes 1.35, bare pods naming a pod group of a v1alpha1 Workload (spec.workloadRef),
//     one gang per replica key; any other pod is a gang of one. A Job may also set
//     `chamber.io/min-member`, or name a gang PodGroup (or Workload pod group) in its template,
//     whose minCount is then its minimum.
//   - Priority: the pod's `spec.priority` (filled from its PriorityClass by the API server); for
//     a Job without pods, its template's PriorityClass (or the global default).
//   - `chamber.io/checkpoint-grace-seconds` and `chamber.io/last-checkpoint` (RFC 3339) on the
//     Job or pod feed the preemption grace period and the GPU-hours-lost account.
//   - Shares of one GPU: `chamber.io/gpu-fraction` and `chamber.io/gpu-memory` on a pod of
//     Chamber's (common/gpu_share_ask.h; docs/sharing.md). A share waits, invalid, until the
//     admission webhook marked it `chamber.io/gpu-env`; annotations that do not read leave the
//     pod waiting with a reason that names them, or, on a bound pod, holding its GPU whole.
//
// State Chamber keeps in the API (so a new leader rebuilds it from there):
//   - `chamber.io/gpu-indices` on a bound pod: the node's GPU slots it holds ("0,1"), set through
//     the binding, unless the node's agent reports which GPUs the device plugin really gave it
//     (BuildOptions::devices), which win. Pods without either (bound by another scheduler, or
//     before it was written) get the lowest free slots. A share holds one slot, beside other shares
//     and never beside a pod holding it whole; a bare pod's share being deleted is a workload
//     releasing it.
//   - `chamber.io/preempted-at` (RFC 3339) on a Job Chamber suspended, and
//     `chamber.io/preemptions` (Unix seconds, comma-separated, the latest few) for the
//     preemption budget. A suspended Job without the first is the user's: Chamber leaves it be.
//   - `chamber.io/preemption-count` and `chamber.io/gpu-hours-lost` on a Job: the lost work of
//     its preemptions so far, so that a new leader reports what the last one counted.
//
// Every bound pod that has not finished holds its node's resources: pods of workloads in the
// snapshot as their placements, all others (other schedulers, DaemonSets, pods being deleted) as
// capacity held outside the engine (Node::external_gpu_mask and less `allocatable`).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/kube/workload_kinds.h"
#include "core/model.h"
#include "kube/types.h"

namespace chamber::backend {

inline constexpr char kDefaultSchedulerName[] = "chamber";
inline constexpr char kGpuResource[] = "nvidia.com/gpu";

namespace keys {
inline constexpr char kQueue[] = "chamber.io/queue";
inline constexpr char kPodGroup[] = "chamber.io/pod-group";
inline constexpr char kMinMember[] = "chamber.io/min-member";
inline constexpr char kCheckpointGrace[] = "chamber.io/checkpoint-grace-seconds";
inline constexpr char kLastCheckpoint[] = "chamber.io/last-checkpoint";
inline constexpr char kGpuModels[] = "chamber.io/gpu-models";  // "H100,A100": allowed models
inline constexpr char kGpuIndices[] = "chamber.io/gpu-indices";
// On a binding (and so on its pod): the Lease of the leader that wrote it ("<namespace>/<name>")
// and that leader's term there ("<holderIdentity>/<leaseTransitions>"). The chart's
// ValidatingAdmissionPolicy refuses a binding whose term is not the Lease's now
// (docs/reliability.md#fencing-a-deposed-leader).
inline constexpr char kLeaderLease[] = "chamber.io/leader-lease";
inline constexpr char kLeaderTerm[] = "chamber.io/leader-term";
// On the pods of a Deployment, StatefulSet or other controller of serving replicas (through its
// pod template): how many of its replicas run reserved (never preempted; within quota), the
// bound ones first, then the oldest.
inline constexpr char kReservedReplicas[] = "chamber.io/reserved-replicas";
inline constexpr char kPreemptedAt[] = "chamber.io/preempted-at";
// On a Job Chamber suspended to roll back a gang whose bind failed: its pods are given back
// without the Job controller counting them as failures, and it is resumed when it fits again.
inline constexpr char kRolledBackAt[] = "chamber.io/rolled-back-at";
inline constexpr char kPreemptions[] = "chamber.io/preemptions";
// On a Job, over its life: how often Chamber preempted it, and the GPU-hours those preemptions
// lost (since each run's last checkpoint). Written with each suspend; read back after a restart.
inline constexpr char kPreemptionCount[] = "chamber.io/preemption-count";
inline constexpr char kGpuHoursLost[] = "chamber.io/gpu-hours-lost";
// Node annotations written by the health controller and the agent.
inline constexpr char kUnhealthyGpus[] = "chamber.io/unhealthy-gpus";  // "2,5"
inline constexpr char kGpuUuids[] = "chamber.io/gpu-uuids";            // comma-separated
// On a reservation pod of chamberd's (docs/sharing.md, "Reservation pods"), in its namespace.
inline constexpr char kGpuReservation[] = "chamber.io/gpu-reservation";  // label
// Node labels.
inline constexpr char kGpuProduct[] = "nvidia.com/gpu.product";
inline constexpr char kGpuMemory[] = "nvidia.com/gpu.memory";  // MiB
inline constexpr char kGpuCount[] = "nvidia.com/gpu.count";    // physical GPUs, MIG mode or not
inline constexpr char kGpuClique[] = "nvidia.com/gpu.clique";  // multi-node NVLink domain
// GPU feature discovery's labels of a node whose device plugin divides its GPUs: replicas of each
// GPU (time-slicing or MPS), the sharing strategy, and the MIG strategy (under "single", with a
// product named "<GPU>-MIG-<profile>", every nvidia.com/gpu is a MIG device).
inline constexpr char kGpuReplicas[] = "nvidia.com/gpu.replicas";
inline constexpr char kGpuSharingStrategy[] = "nvidia.com/gpu.sharing-strategy";
inline constexpr char kMigStrategy[] = "nvidia.com/mig.strategy";
inline constexpr char kBlock[] = "chamber.io/block";
inline constexpr char kZone[] = "topology.kubernetes.io/zone";
}  // namespace keys

// Everything the builder reads, as the informers hold it.
struct ClusterObjects {
  std::vector<std::shared_ptr<const kube::Node>> nodes;
  std::vector<std::shared_ptr<const kube::Pod>> pods;
  std::vector<std::shared_ptr<const kube::Job>> jobs;
  // Top-level objects of the kinds in WorkloadKinds() (JobSets, ...).
  std::vector<std::shared_ptr<const kube::Object>> owners;
  // Upstream PodGroups (scheduling.k8s.io), and Kubernetes 1.35's Workloads (v1alpha1), where
  // the cluster serves them; each object says its kind.
  std::vector<std::shared_ptr<const kube::Object>> pod_groups;
  std::vector<std::shared_ptr<const kube::PriorityClass>> priority_classes;
  std::vector<std::shared_ptr<const kube::Namespace>> namespaces;
  std::vector<core::Queue> queues;
};

// A bind that the API server accepted but the pod informer has not shown yet: the pod is taken
// as bound there, so the next cycle neither binds it again nor gives its GPUs to someone else.
struct AssumedBind {
  std::string pod;  // "namespace/name"
  std::string node;
  std::vector<int> gpu_indices;
  int64_t expires_ms = 0;  // after this the informer's view wins
};
using AssumedBinds = std::unordered_map<std::string, AssumedBind>;  // by pod UID

// Jobs and top-level objects chamberd has just suspended to roll a gang back, whose suspension
// the informer has not shown yet: each is taken as suspended (by chamberd, its controller not
// yet acting on it), so that the next cycle does not place what is left of the gang pod by pod
// as if it were running. By UID; the value is when the informer's view wins again (Unix ms).
using AssumedSuspends = std::unordered_map<std::string, int64_t>;

// A workload's pod as the build saw it: the informer's object itself, shared, whose name, UID
// and resourceVersion are the preconditions of the writes about it.
struct PodRef {
  std::shared_ptr<const kube::Pod> pod;
  const std::string& namespace_name() const { return pod->metadata.namespace_name; }
  const std::string& name() const { return pod->metadata.name; }
  const std::string& uid() const { return pod->metadata.uid; }
  const std::string& resource_version() const { return pod->metadata.resource_version; }
  std::string Key() const { return namespace_name() + "/" + name(); }
};

// Where a snapshot workload came from, to carry decisions back: the Job, the top-level object
// or the pods as the informers hold them (shared), whose names and versions the writes about
// them read.
struct WorkloadSource {
  // kOwner: a top-level object of a kind in WorkloadKinds() (a JobSet), whose pods come
  // through its Jobs or directly.
  enum class Kind { kJob, kOwner, kPodGroup, kPod };
  Kind kind = Kind::kPod;
  std::shared_ptr<const kube::Job> job;       // kJob
  std::shared_ptr<const kube::Object> owner;  // kOwner
  const WorkloadKind* owner_kind = nullptr;   // kOwner
  bool owner_suspendable = true;              // kOwner: KindSpec::suspendable
  // kOwner of a kind whose gang is a part's (KindSpec::gang_from_part): that part (a TrainJob's
  // JobSet), suspended with the object so that its controller stops its Jobs at once.
  std::shared_ptr<const kube::Object> part;
  const WorkloadKind* part_kind = nullptr;
  std::string group;  // kPodGroup: the group's name
  // The upstream PodGroup (scheduling.k8s.io) whose status conditions chamberd writes as
  // kube-scheduler does: a kPodGroup's own, or the gang PodGroup a kJob's pods name (its
  // template's, or the one the Job controller made for it).
  std::shared_ptr<const kube::Object> pod_group;
  // The Job or top-level object: the lost work its annotations record (kPreemptionCount,
  // kGpuHoursLost).
  int64_t stored_preemptions = 0;
  double stored_gpu_hours_lost = 0;
  // Per pod set, the pods by replica index: pending pods for a pending workload (bind
  // decisions index into these), bound pods in placement order for a running one. A pod
  // group's or a pod's workload has one pod at least.
  std::vector<std::vector<PodRef>> pods;

  // The Job's or top-level object's namespace, else the first pod's.
  const std::string& namespace_name() const;
  // The Job's, the top-level object's, the group's or the pod's.
  const std::string& name() const;
  // Whether Chamber preempts it by suspending an object (a Job or a top-level object), and
  // that object's resource, UID and resourceVersion (the preconditions of suspend and resume;
  // "" for neither), and the merge patch that sets its suspend flag.
  bool Suspendable() const {
    return kind == Kind::kJob || (kind == Kind::kOwner && owner_suspendable);
  }
  const kube::ResourceType& SuspendableType() const;
  const std::string& suspendable_uid() const;
  const std::string& suspendable_resource_version() const;
  kube::Json SuspendPatch(bool suspend) const;
  // What Events are about, the Job, the top-level object or the first pod: apiVersion, kind
  // and metadata, as kube::EventSpec::involved takes them.
  kube::Json Involved() const;
  // Every pod's "namespace/name", in pod-set order.
  std::vector<std::string> PodKeys() const;
  // Whether it is a single pod whose "namespace/name" is `key`.
  bool IsPodNamed(std::string_view key) const;
};

class BuildCache;
struct BuiltSnapshot;

// Which GPUs the device plugin gave which pods, as each node's chamber-agent last read the
// kubelet's pod-resources API: by node name, pod ("namespace/name") -> its GPUs' indices (bit i:
// GPU i), for pods holding `nvidia.com/gpu` whole. Only nodes whose agent reports now and reads
// pod-resources are listed.
using NodeDevices = std::map<std::string, uint64_t>;
using DeviceAssignments = std::unordered_map<std::string, std::shared_ptr<const NodeDevices>>;

// A reservation pod (docs/sharing.md, "Reservation pods"): a pod of chamberd's, in its
// namespace, that holds one GPU from the device plugin so that shares may be bound to it.
struct GpuReservation {
  std::string key;  // "namespace/name"
  std::string uid;
  int32_t node = -1;  // the snapshot's node index
  int gpu = -1;  // the GPU the device plugin gave it, as the node's agent reports; -1: none yet
  bool deleting = false;  // being deleted: it still holds its GPU, and no share is bound there
  bool failed = false;    // ended (the kubelet could not run it, say): it holds nothing
  int64_t created_ms = 0;
};

struct BuildOptions {
  std::string scheduler_name = kDefaultSchedulerName;
  std::string gpu_resource = kGpuResource;
  core::Time now{0};  // Unix milliseconds
  // Binds assumed; an assumption is used only while the pod's own nodeName is empty.
  const AssumedBinds* assumed = nullptr;
  // Suspensions assumed; one is used only while the object itself is not suspended.
  const AssumedSuspends* suspending = nullptr;
  // The device plugin's own assignment of whole GPUs: where a node's agent reports a pod's
  // GPUs, the pod holds those, whatever its chamber.io/gpu-indices says (null: none known).
  const DeviceAssignments* devices = nullptr;
  // chamberd's namespace, where its reservation pods are (labelled kGpuReservation); empty:
  // none are read, and such pods count as any other scheduler's.
  std::string reservation_namespace;
  size_t max_preemptions_kept = 10;
  // What earlier builds derived from objects that have not changed since (null: derive
  // everything). The snapshot is the same with or without it.
  BuildCache* cache = nullptr;
  // Threads that derive changed pods when there are many (a thousand or more per thread):
  // 0 for up to the machine's cores (at most 8), 1 for the calling thread alone. The snapshot
  // is the same either way.
  int derive_threads = 0;
  // An earlier result whose memory the build may reuse (its nodes' strings and vectors, and,
  // when it is the cache's last build, the workloads of unchanged bare pods); it is left empty
  // or partly emptied.
  BuiltSnapshot* recycle = nullptr;
};

struct BuiltSnapshot {
  core::Snapshot snapshot;
  std::vector<WorkloadSource> sources;  // parallel to snapshot.workloads
  // Objects read with a problem that was worked around ("pod ml/x: annotation
  // chamber.io/gpu-indices: ..."), for logs and Events.
  std::vector<std::string> problems;
  // Pods of ours waiting for the rest of their gang to be created.
  int32_t incomplete_gangs = 0;
  // Reservation pods on known nodes (BuildOptions::reservation_namespace), in name order. Those
  // whose GPU is reported, live and not being deleted, mark it in their node's
  // reserved_gpu_mask; none holds a GPU in the snapshot otherwise (a reserved GPU without
  // shares is free to the engine).
  std::vector<GpuReservation> reservations;
  // UIDs of assumed binds whose pods now show a node: the caller may drop those assumptions.
  std::vector<std::string> assumptions_shown;
  // UIDs of assumed suspensions the objects now show: the caller may drop those.
  std::vector<std::string> suspensions_shown;
  // The cache's build that made it (0: built without a cache). A build that recycles the one
  // just before it moves over the workloads of bare pods that have not changed.
  uint64_t generation = 0;
};

// What a build derives from each node, pod and Job on its own (requests, parsed annotations and
// times, the engine's node, the sort order), kept for the next build. Informers hand out a new
// object whenever one changes, so an entry is found by the object's address and is valid while
// the object is the same one (the same shared_ptr control block, which the entry keeps through
// a weak_ptr). Entries of objects a build no longer sees are dropped by the next Prepare (or, if
// none comes, the next build), so that the build itself does not free them. One build at a
// time; BuildSnapshot returns the same with or without a cache.
class BuildCache {
 public:
  BuildCache();
  ~BuildCache();
  BuildCache(const BuildCache&) = delete;
  BuildCache& operator=(const BuildCache&) = delete;

  size_t size() const;  // entries held, those not swept yet included
  // Objects derived afresh by the last build (the others came from the cache or Prepare).
  size_t last_derived() const;
  // Workloads the last build moved over from the snapshot it recycled.
  size_t last_reused() const;

  // Derives what the next build will need from `objects` now, so that it does not have to:
  // chamberd calls it between cycles, as objects change. Returns the objects derived.
  size_t Prepare(const ClusterObjects& objects, const BuildOptions& options);

 private:
  friend class Builder;
  friend BuiltSnapshot BuildSnapshot(const ClusterObjects&, const BuildOptions&);
  struct State;
  std::unique_ptr<State> state_;
};

BuiltSnapshot BuildSnapshot(const ClusterObjects& objects, const BuildOptions& options);

// "0,3,5" -> {0,3,5}; errors name the bad element.
Result<std::vector<int>> ParseIndexList(std::string_view text);
std::string FormatIndexList(const std::vector<int>& indices);
std::vector<int> MaskToIndices(uint64_t mask);

}  // namespace chamber::backend
