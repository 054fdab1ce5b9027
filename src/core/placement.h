// Placement: where a gang's pods go, all of them or none.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/cluster_state.h"
#include "core/decision.h"
#include "core/model.h"
#include "core/node_capacity_map.h"

namespace chamber::core {

// Why a node can never take a pod of a pod set this cycle, whatever is free.
enum class NodeFilter : uint8_t {
  kOk,
  kUnschedulable,
  kNodeSelector,
  kTaint,
  kGpuModel,
  kDevicePluginShares,  // a share of a GPU, on a node whose device plugin divides its GPUs
  kNoMigDevices,        // MIG devices of a profile the node does not advertise
};

// Static feasibility per distinct (node selector, tolerations, GPU models), computed once per
// cycle on first use. Most workloads share a handful of such constraint sets.
class ShareScores;

class FeasibilityCache {
 public:
  // With `snapshot`, shares placed on `state`'s free capacity go where they least fragment it
  // under the snapshot's mix (share_scores.h); without, to the fullest GPU they fit beside.
  explicit FeasibilityCache(const ClusterState& state, const Snapshot* snapshot = nullptr);
  ~FeasibilityCache();
  FeasibilityCache(const FeasibilityCache&) = delete;
  FeasibilityCache& operator=(const FeasibilityCache&) = delete;
  // Filter result per node for the pod set's constraints; the id names the constraint set.
  // Computed on first use and kept: the cache is filled behind a const reference, so policies
  // read it without being able to change what it says.
  const std::vector<NodeFilter>& For(const PodSet& pod_set, int32_t* id = nullptr) const;
  // The share scores over `state` (the state this cache was built for), built on first use;
  // nullptr without a snapshot, or for another state.
  ShareScores* ScoresFor(const ClusterState& state) const;
  // Drops the share scores: the next use builds them from the snapshot as it is then.
  void ForgetShareScores();

 private:
  const ClusterState* state_;
  const Snapshot* snapshot_;
  mutable std::unique_ptr<ShareScores> scores_;
  mutable std::unordered_map<std::string, int32_t> ids_;
  // The first few constraint sets seen, compared field by field before a signature is built
  // and hashed: comparing is cheaper, and most pod sets of a cycle match one of them.
  struct Known {
    bool gpu = false;
    bool share = false;
    int8_t mig = -1;
    std::vector<std::pair<std::string, std::string>> node_selector;
    Interned<std::vector<Toleration>> tolerations;
    std::vector<std::string> gpu_models;
    int32_t id = 0;
  };
  mutable std::vector<Known> known_;
  // A deque: For's results stay valid as it grows.
  mutable std::deque<std::vector<NodeFilter>> filters_;
};

// Capacity a placement may use beyond what is free: what preemption victims will release. A GPU
// holding shares comes back whole only when every share on it is in the overlay; before that,
// the compute and memory of its shares in the overlay are room for another share beside those
// that stay.
class CapacityOverlay {
 public:
  // Pod `i` of workload `w`, which holds placements[i], releases what it holds.
  void AddPod(const ClusterState& state, const Workload& w, size_t i);
  // A pod of `request` (holding `gpu_memory_mib` of its GPU's memory, for a share) at `p`.
  void Add(const ClusterState& state, const PodPlacement& p, const Resources& request,
           int64_t gpu_memory_mib = 0, MigAsk mig = {});
  // Takes what one waiting workload counts on out of the overlay: no one else counts on it. A
  // share counting on room leaving shares release closes their GPU to other shares in the
  // ClusterState (Hold), which the overlay honours.
  void Take(int32_t node, const NodeCapacity& taken);
  bool empty() const { return extra_.empty(); }
  const NodeCapacity* Find(int32_t node) const { return extra_.Find(node); }
  const std::vector<int32_t>& nodes() const {
    return extra_.nodes();
  }  // in order of first addition
  int64_t gpus() const { return gpus_; }

  // The compute (thousandths) and memory (MiB) of GPU `gpu`'s shares in the overlay: room beside
  // the shares that stay.
  struct ShareRoom {
    int64_t milli = 0;
    int64_t memory_mib = 0;
  };
  ShareRoom SharesReleased(int32_t node, int gpu) const {
    for (const ShareReleased& r : shares_)
      if (r.node == node && r.gpu == gpu) return {r.milli, r.memory_mib};
    return {};
  }
  // Whether any share is in the overlay on `node`.
  bool ReleasesShares(int32_t node) const {
    for (const ShareReleased& r : shares_)
      if (r.node == node) return true;
    return false;
  }

 private:
  NodeCapacityMap extra_;
  int64_t gpus_ = 0;
  struct ShareReleased {
    int32_t node;
    int32_t gpu;
    int64_t milli;
    int64_t memory_mib;
  };
  std::vector<ShareReleased> shares_;  // per shared GPU with a share in the overlay
};

// A node's free capacity, plus what `overlay` adds there, minus `consumed` (either may be null).
NodeCapacity EffectiveCapacity(const ClusterState& state, int32_t node,
                               const CapacityOverlay* overlay, const NodeCapacity* consumed);

struct PlacementPlan {
  std::vector<PodAssignment> pods;
};

// One try at placing a gang: what the pods placed so far take, on top of the cluster's free
// capacity and an overlay (either may be absent). A pod of whole GPUs takes free GPUs, the
// overlay's among them. A pod asking for a share of a GPU takes room on one GPU: beside other
// shares where it fits, counting the room the overlay's shares release there, on the GPU left
// with the least compute after it (ties: the lowest index); else on a free GPU, the overlay's
// among them, with enough memory, from the NVLink island with the fewest free GPUs.
class GangAttempt {
 public:
  GangAttempt(const ClusterState& state, const CapacityOverlay* overlay)
      : state_(state), overlay_(overlay) {}

  NodeCapacity Effective(int32_t n) const {
    return EffectiveCapacity(state_, n, overlay_, consumed_.Find(n));
  }
  bool Fits(int32_t n, const PodSet& ps) const {
    if (!Effective(n).Fits(ps.request, ps.mig)) return false;
    return !ps.request.gpu_share() || ShareGpu(n, ps) >= 0;
  }
  // Places pod `replica` of pod set `set` on node `n`, which fits it.
  void Take(int32_t n, int32_t set, int32_t replica, const PodSet& ps);
  // A share of `ps` on GPU `g` of node `n`, which the caller found room on.
  void TakeShare(int32_t n, int g, int32_t set, int32_t replica, const PodSet& ps);
  void Reset() {
    consumed_.clear();
    shares_.clear();
    plan_.pods.clear();
  }

  // The nodes the try uses, in order of first use.
  const std::vector<int32_t>& used() const { return consumed_.nodes(); }
  bool Uses(int32_t n) const { return consumed_.Find(n) != nullptr; }
  // What the try takes on node `n` (its GPUs, whole or for shares, CPU, memory and pod slots),
  // or nullptr where it takes nothing.
  const NodeCapacity* Consumed(int32_t n) const { return consumed_.Find(n); }
  struct ShareTaken {
    int32_t node;
    int32_t gpu;
    int64_t milli;
    int64_t memory_mib;
  };
  // The try's shares, one entry per pod.
  std::span<const ShareTaken> shares() const { return shares_; }
  // The plan, in pod-set and replica order.
  PlacementPlan TakePlan();

 private:
  // The GPU a share of `ps` would take on node `n`, or -1.
  int ShareGpu(int32_t n, const PodSet& ps) const;

  const ClusterState& state_;
  const CapacityOverlay* overlay_;
  NodeCapacityMap consumed_;  // per node the gang uses, in order of first use
  std::vector<ShareTaken> shares_;
  PlacementPlan plan_;
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view name() const = 0;
  // Places the first `pods` pods of `w` (in pod-set order) all together, or returns nothing.
  // With an overlay, the capacity in it counts as free too.
  virtual std::optional<PlacementPlan> Place(const ClusterState& state,
                                             const FeasibilityCache& feasibility, const Workload& w,
                                             int32_t pods,
                                             const CapacityOverlay* overlay) const = 0;
};

// The default policy. Limits fragmentation and keeps gangs close:
//   - a single pod goes to the fullest node that still fits it (best fit), so whole nodes stay
//     free for large gangs;
//   - a gang goes on one node if one can hold it, else into the tightest multi-node NVLink
//     domain, then block, then zone that can, else anywhere; within that, each pod first tries
//     the nodes the gang already uses, then the fullest node that fits;
//   - within a node, GPUs come from the NVLink island that fits them most tightly;
//   - a single share goes where it least raises fragmentation under the cycle's mix
//     (share_scores.h), and so does each pod of a gang of shares on free capacity, given the
//     gang's pods placed before it (on an equal raise, a node the gang already uses); a gang of
//     shares counting on victims' room, or of shares and whole GPUs, puts its shares beside
//     other shares on the fullest GPU they fit.
class TopologyBinPacking final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "topology-bin-packing"; }
  std::optional<PlacementPlan> Place(const ClusterState& state, const FeasibilityCache& feasibility,
                                     const Workload& w, int32_t pods,
                                     const CapacityOverlay* overlay) const override;
};

// Chooses `count` GPUs from `free_mask`, preferring the island that fits them most tightly.
uint64_t PickGpus(uint64_t free_mask, std::span<const uint64_t> islands, int count);

struct PlacementExplanation {
  std::string message;
  std::vector<std::string> details;
};

// Why the first `pods` pods of `w` fit nowhere on the free capacity: counts nodes by the first
// reason each fails, e.g. "no node fits 8 gpu: 120 nodes too few free GPUs, 30 untolerated
// taint". For a gang whose pods fit somewhere one by one, says how many of them could be placed.
// What a pod of `ps` asks of its node, for messages: "1 gpu, 4000m cpu", "MIG 1g.10gb, 2000m cpu"
// (FormatResources, with its MIG devices).
std::string FormatPodAsk(const PodSet& ps, const std::vector<MigResource>& mig_profiles);

PlacementExplanation ExplainNoFit(const ClusterState& state, const FeasibilityCache& feasibility,
                                  const Workload& w, int32_t pods);

}  // namespace chamber::core
