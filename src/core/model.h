// The engine's input: a snapshot of nodes, GPUs, queues and workloads at one instant.
// The daemon builds it from the apiserver, the simulator from its event queue; the engine only
// reads it. Cross-references use indices into the snapshot's vectors (NodeId, WorkloadId) so that
// a cycle never hashes a string on its hot path; queues are named, since there are
// few of them and a wrong name must become a readable reason.
#pragma once

#include <array>
#include <bit>
#include <chrono>
#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/interned.h"
#include "common/shared_string.h"
#include "common/shared_value.h"
#include "core/resources.h"

namespace chamber::core {

// Milliseconds on the caller's clock (wall clock in the daemon, simulated time in the simulator).
using Duration = std::chrono::milliseconds;
using Time = std::chrono::milliseconds;

template <typename Tag>
struct Id {
  int32_t value = -1;
  constexpr bool valid() const { return value >= 0; }
  constexpr size_t index() const { return static_cast<size_t>(value); }
  friend constexpr auto operator<=>(const Id&, const Id&) = default;
};
using NodeId = Id<struct NodeTag>;
using WorkloadId = Id<struct WorkloadTag>;
using QueueId = Id<struct QueueTag>;

// Priority at or above this is reserved: it runs only within quota and is never preempted.
inline constexpr int32_t kReservedPriority = 100;

// A node has at most this many GPUs (placements are bitmasks over device indices).
inline constexpr int kMaxGpusPerNode = 64;

// MIG devices of the NVIDIA device plugin's mixed strategy (`nvidia.com/mig-<profile>`) are
// counted per node and profile; the kubelet chooses which device a pod gets. A snapshot names at
// most this many profiles, and a node advertises at most kMaxMigDevices of each.
inline constexpr int kMaxMigProfiles = 8;
inline constexpr int kMaxMigDevices = 255;

// A MIG profile a snapshot's nodes advertise: "1g.10gb", and what one device of it is charged in
// GPU-equivalents, its compute slices over its GPU's (MigDeviceMilli).
struct MigResource {
  std::string name;
  int32_t milli = 0;
};

// Thousandths of a GPU charged for a device of `slices` compute slices on a GPU of `gpu_slices`
// (7 on A100, H100, H200; 4 on A30), rounded down: a GPU's devices never add up to more than one
// GPU. 1g of 7: 142, 2g: 285, 3g: 428, 4g: 571, 7g: 1000.
constexpr int32_t MigDeviceMilli(int32_t slices, int32_t gpu_slices) {
  return gpu_slices <= 0 ? 0 : static_cast<int32_t>(int64_t{slices} * kMilliPerGpu / gpu_slices);
}

// What one pod asks of a node's MIG devices: `devices` of profile `profile` (an index into
// Snapshot::mig_profiles; -1: none), each charged `milli` (the profile's).
// Four bytes, so that it sits in PodSet's padding.
struct MigAsk {
  int8_t profile = -1;
  uint8_t devices = 0;  // at most kMaxMigDevices
  int16_t milli = 0;
  // A profile past kMaxMigProfiles is none: nothing indexes by it.
  bool any() const { return profile >= 0 && profile < kMaxMigProfiles && devices > 0; }
  int64_t charge() const { return any() && milli > 0 ? int64_t{devices} * milli : 0; }
  friend bool operator==(const MigAsk&, const MigAsk&) = default;
};

struct Gpu {
  // Shared with the copies in every snapshot and fleet state (160,000 GPUs are many copies).
  SharedString uuid;
  SharedString model;  // e.g. "H100-SXM5-80GB"
  int64_t memory_mib = 0;
  bool healthy = true;        // false: excluded from scheduling
  int32_t nvlink_island = 0;  // GPUs with the same value share an NVLink/NVSwitch island
  int32_t pcie_domain = 0;    // PCIe switch or NUMA domain
};

enum class TaintEffect { kNoSchedule, kPreferNoSchedule, kNoExecute };

struct Taint {
  std::string key;
  std::string value;
  TaintEffect effect = TaintEffect::kNoSchedule;
};

struct Toleration {
  enum class Operator { kEqual, kExists };
  std::string key;  // empty key with kExists tolerates every taint
  Operator op = Operator::kEqual;
  std::string value;
  std::optional<TaintEffect> effect;  // empty: all effects
  friend auto operator<=>(const Toleration&, const Toleration&) = default;
};

// Where a node sits. Gangs are packed into as few of these as possible, finest first.
struct Topology {
  std::string nvlink_domain;  // multi-node NVLink domain (e.g. an NVL72 rack); empty if none
  std::string block;          // rack or network block
  std::string zone;
};

using Labels = std::vector<std::pair<std::string, std::string>>;

struct Node {
  std::string name;
  Shared<Labels> labels;  // shared with the copies in every snapshot
  std::vector<Taint> taints;
  bool unschedulable = false;  // cordoned
  // Its device plugin divides its GPUs itself (time-slicing or MPS replicas, MIG devices under
  // the single strategy): each entry of `gpus` may be a part of a GPU, so no share of a GPU goes
  // here. Pods asking for whole GPUs still do. (Kept beside `unschedulable`, in its padding:
  // Node's size is felt by every pass over the nodes.)
  bool device_plugin_shares = false;
  int32_t max_pods = 110;
  // MIG devices of the device plugin's mixed strategy: per profile of Snapshot::mig_profiles,
  // the devices the node advertises that no pod the engine does not schedule holds. MIG GPUs are
  // not in `gpus`.
  std::array<uint8_t, kMaxMigProfiles> mig_devices{};
  Resources allocatable;  // cpu and memory; the gpu entry is ignored: GPUs come from `gpus`
  std::vector<Gpu> gpus;  // index = device index on the node
  // The model of its GPUs in MIG mode (empty: none, or not known): a node without whole GPUs
  // counts as of this model for pods naming GPU models and for quotas per GPU model.
  SharedString mig_model;
  Topology topology;
  // GPUs held by pods the engine does not schedule (another scheduler's pods, system pods): bit
  // i = GPU i. They are never free and never preempted. Their CPU and memory are left out of
  // `allocatable` by the caller.
  uint64_t external_gpu_mask = 0;
  // GPUs that a reservation pod holds from the device plugin so that shares may sit on them
  // (docs/sharing.md, "Reservation pods"): bit i = GPU i. To the engine they are free or shared
  // as their pods make them; a share goes on one of them before a GPU of equal standing that
  // none holds, so that it needs no new reservation.
  uint64_t reserved_gpu_mask = 0;
};

// A set of identical pods within a workload (a Job's pod template, a pod group's members).
struct PodSet {
  std::string name;
  int32_t count = 1;
  // MIG devices per pod; with them, `request` asks for no GPU (its gpu entry is 0). (Beside
  // `count`, in its padding: pod sets are read by the hundred thousand every cycle.)
  MigAsk mig = {};
  // Per pod. GPUs: whole GPUs (a multiple of 1,000 thousandths), or a share of one GPU's compute
  // (1 to 999 thousandths) that other pods' shares may sit beside.
  Resources request = {};
  std::vector<std::pair<std::string, std::string>> node_selector = {};
  // One list shared by every pod set with the same tolerations (most pods carry the same ones).
  Interned<std::vector<Toleration>> tolerations = {};
  std::vector<std::string> gpu_models = {};  // allowed GPU models; empty: any
  // With a share: the GPU memory the pod holds on its GPU, in MiB (0: none asked).
  int64_t gpu_memory_mib = 0;
  // A share asked for by its memory alone (docs/sharing.md, "A share of memory alone"): the
  // caller sets `request`'s thousandths to the part of its GPU it holds, or, waiting, the part
  // of the smallest GPU it may go on. To the engine it is a share like any other.
  bool gpu_memory_only = false;
  // What one pod counts against its queue in GPU thousandths, when not its request's GPUs: the
  // caller's charge for units of nodes whose device plugin divides GPUs (docs/sharing.md,
  // "Nodes whose device plugin divides GPUs"), which are placed as whole GPUs and are parts of
  // them. 0: the request's.
  int32_t gpu_charge_milli = 0;
  // Why the caller found the pods unschedulable as they are (an annotation that does not read,
  // say); not empty: the workload waits as kInvalidWorkload with this reason.
  std::string invalid_reason = {};

  // What one pod counts against its queue: `request` (its GPUs as `gpu_charge_milli` says, when
  // set), and its MIG devices' charge.
  Resources Charge() const {
    Resources r = request;
    if (gpu_charge_milli > 0) r[Resource::kGpu] = gpu_charge_milli;
    r[Resource::kGpu] += mig.charge();
    return r;
  }
};

enum class WorkloadState {
  kPending,     // never started, or its pods were recreated
  kRunning,     // holds `placements`
  kPreempting,  // a victim inside its grace period: still holds `placements`, releasing them
  kSuspended,   // preempted and paused (a suspended Job); waits to be resumed
};

// One pod's place: a node and the device indices it holds there (bit i = GPU i).
struct PodPlacement {
  NodeId node;
  uint64_t gpu_mask = 0;
  friend bool operator==(const PodPlacement&, const PodPlacement&) = default;
};

struct Workload {
  std::string name;   // "namespace/name"
  std::string queue;  // a leaf queue's name
  int32_t priority = 0;
  Time submit_time{0};
  int32_t min_member = 0;  // 0: all pods; otherwise the gang's all-or-nothing minimum
  // Pods the gang needs that do not exist yet (a Job whose controller has not created them all,
  // a pod group short of its minimum): such a workload waits with kWaitingForPods and holds
  // nothing. `pod_sets` holds the pods that exist.
  int32_t awaited_pods = 0;
  std::vector<PodSet> pod_sets;
  WorkloadState state = WorkloadState::kPending;

  // kRunning and kPreempting: one entry per placed pod, in pod-set order.
  std::vector<PodPlacement> placements;
  Time start_time{0};
  std::optional<Time> last_checkpoint_time;
  std::vector<Time> recent_preemptions;  // when this workload was preempted before
  std::optional<int32_t> checkpoint_grace_seconds;
  // Bind backoff (docs/scheduling.md, "When a bind fails"): a waiting gang whose bind failed
  // and was rolled back is not placed before `bind_retry_at` (a time after the snapshot's
  // `now`: it waits with kBindBackoff, holds nothing and takes no place in its queue).
  // `bind_rollbacks` counts its rollbacks in a row and `bind_failure` says what failed last,
  // for its reason; with no rollback, `bind_failure` says why the caller held its bind back
  // (a share waiting for a reservation pod's GPU, docs/sharing.md).
  Time bind_retry_at{0};
  int32_t bind_rollbacks = 0;
  std::string bind_failure;

  int32_t TotalPods() const;
  // What its pods count against its queue (PodSet::Charge): over all pods, and over the first
  // `pods` pods, in pod-set order.
  Resources TotalRequest() const;
  Resources RequestOfFirst(int32_t pods) const;
  // The request of the pod holding placements[i] (placements follow pod-set order): what it
  // asks of its node, MIG devices aside.
  Resources PlacementRequest(size_t i) const;
  // The pod set of the pod holding placements[i]; nullptr past the last pod.
  const PodSet* PlacementPodSet(size_t i) const;
  // Whether any of its pods asks for a share of a GPU rather than whole GPUs.
  bool AsksForShares() const;
  bool reserved() const { return priority >= kReservedPriority; }
};

enum class QueueingStrategy { kBestEffort, kStrictFifo };

// Which of its own queue's running work a waiting workload may preempt.
enum class WithinQueuePreemption {
  kNever,
  kLowerPriority,              // strictly lower priority (the default)
  kLowerOrNewerEqualPriority,  // or equal priority and submitted later than the preemptor
};
// Which work of other queues a waiting workload may reclaim, when the rules allow reclaim.
enum class ReclaimPreemption {
  kNever,
  kLowerPriority,  // only work of lower priority than the preemptor
  kAny,            // whatever its priority (the default)
};

// Whether work that would take its queue beyond quota may still preempt other queues' borrowed
// work (only where fair-share reclaim is off: with it on, fair share decides).
enum class WhileBorrowingPreemption {
  kNever,          // the default
  kLowerPriority,  // work of lower priority, at most max_priority_threshold
};

// A queue's preemption policy (docs/fairness.md, "Per-queue preemption policy").
struct QueuePreemption {
  WithinQueuePreemption within_queue = WithinQueuePreemption::kLowerPriority;
  ReclaimPreemption reclaim = ReclaimPreemption::kAny;
  WhileBorrowingPreemption while_borrowing = WhileBorrowingPreemption::kNever;
  std::optional<int32_t> max_priority_threshold;  // with kLowerPriority; empty: no bound
  // A waiting workload of the queue may preempt only once it has waited this long.
  std::chrono::milliseconds delay{0};
  friend bool operator==(const QueuePreemption&, const QueuePreemption&) = default;
};

// Per-resource share settings of a queue. Quantities use the Resources units.
struct QueueResource {
  int64_t quota = 0;                   // guaranteed share
  int64_t limit = kUnlimited;          // hard cap, -1 for none
  double over_quota_weight = 1.0;      // share of the surplus beyond quota
  int64_t lending_limit = kUnlimited;  // how much unused quota others may borrow; -1: all
  friend bool operator==(const QueueResource&, const QueueResource&) = default;
};

// A queue's GPUs of one model (docs/queues.md, "GPU models"): quota, limit, weight and lending
// limit of the GPU-equivalents it holds on GPUs of that model.
struct GpuModelQuota {
  std::string model;  // as the nodes name it (Gpu::model)
  QueueResource gpu;
  friend bool operator==(const GpuModelQuota&, const GpuModelQuota&) = default;
};

struct Queue {
  std::string name;
  std::string parent;  // empty for a top-level queue
  std::array<QueueResource, kNumResources> resources{};
  // GPU models its work may run on, each with its own GPU quota (resources.gpu.models). Before a
  // cycle, SplitGpuModelQueues (core/gpu_model_queues.h) makes the queue the parent of one queue
  // per model and clears this; the engine rejects a queue that still has it.
  std::vector<GpuModelQuota> gpu_models;
  int32_t priority = 0;                      // higher-priority queues are served first
  std::optional<QueueingStrategy> queueing;  // empty: the configured default
  QueuePreemption preemption;
  double decayed_usage = 0;  // GPU-hours with exponential decay, kept by the caller

  QueueResource& res(Resource r) { return resources[static_cast<int>(r)]; }
  const QueueResource& res(Resource r) const { return resources[static_cast<int>(r)]; }
};

struct Snapshot {
  Time now{0};
  std::vector<Node> nodes;
  // The MIG profiles that Node::mig_devices and PodSet::mig index, at most kMaxMigProfiles.
  std::vector<MigResource> mig_profiles;
  std::vector<Queue> queues;
  std::vector<Workload> workloads;
};

// GPU-equivalents (thousandths) a placed pod of `request` holds: its share of one GPU, or 1,000
// for each GPU of its placement.
inline int64_t HeldGpuMilli(const PodPlacement& p, const Resources& request) {
  return request.gpu_share() ? request.gpu_milli() : Gpus(std::popcount(p.gpu_mask));
}
// The same for a pod of `ps` (nullptr: none), its MIG devices' charge included.
inline int64_t HeldGpuMilli(const PodPlacement& p, const PodSet* ps) {
  return ps == nullptr              ? Gpus(std::popcount(p.gpu_mask))
         : ps->gpu_charge_milli > 0 ? ps->gpu_charge_milli + ps->mig.charge()
                                    : HeldGpuMilli(p, ps->request) + ps->mig.charge();
}

// The GPUs a waiting share of memory alone may go on (docs/sharing.md, "A share of memory
// alone"): the healthy GPUs of known memory on nodes that take shares, kept by model and memory.
class ShareableGpuMemories {
 public:
  explicit ShareableGpuMemories(const std::vector<Node>& nodes);
  // The memory of the smallest of them with at least `ps.gpu_memory_mib`, of a model `ps`
  // accepts (PodSet::gpu_models, or any); 0 when none.
  int64_t SmallestFor(const PodSet& ps) const;

 private:
  std::vector<std::pair<std::string, int64_t>> kinds_;  // (model, memory), sorted, unique
};

// Calls fn(node, gpu) for each GPU that workload `w` of `s` holds and the node has, in placement
// order: what a caller needs to tell which GPUs a preemption freed.
template <typename Fn>
void ForEachHeldGpu(const Snapshot& s, const Workload& w, Fn&& fn) {
  for (const PodPlacement& pl : w.placements) {
    if (!pl.node.valid() || pl.node.index() >= s.nodes.size()) continue;
    const Node& node = s.nodes[pl.node.index()];
    for (uint64_t mask = pl.gpu_mask; mask != 0; mask &= mask - 1) {
      const auto g = static_cast<size_t>(std::countr_zero(mask));
      if (g < node.gpus.size()) fn(node, g);
    }
  }
}

}  // namespace chamber::core
