// Victim selection: which running workloads to preempt so that a waiting one can be placed.
// The engine decides who may be a victim (elastic, past its minimum runtime, within its
// preemption budget, in a queue that borrowed or of lower priority); the selector decides which
// of them, minimising in order the number of victims, their priority and the GPU-hours they lose.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/cluster_state.h"
#include "core/decision.h"
#include "core/placement.h"

namespace chamber::core {

struct VictimCandidate {
  WorkloadId workload;
  PreemptReason reason = PreemptReason::kReclaim;
  int32_t priority = 0;
  double gpu_hours_lost = 0;
  double queue_overshare = 0;  // its queue's usage over fair share; reclaim takes from the highest
  int32_t queue = -1;          // its queue's index in the snapshot (for VictimRules)
  Resources held;              // what it holds, counted against its queue
  // The workload's pod placements. The engine passes a compact copy because selection reads those
  // of every candidate for every preemptor; left empty, they are read from the snapshot.
  std::span<const PodPlacement> placements;
};

// What a victim set must respect besides making room: the engine's quota, limit and fair-share
// rules (docs/fairness.md). A selector offers only sets that a rule set allows and finds
// enough; without rules, every set is allowed and enough.
class VictimRules {
 public:
  virtual ~VictimRules() = default;
  // Whether taking all of `victims` keeps every promise to the queues they come from.
  virtual bool Allows(std::span<const VictimCandidate> victims) const = 0;
  // Whether their leaving frees enough of the preemptor's queue limits for it to be admitted.
  virtual bool Enough(std::span<const VictimCandidate> victims) const = 0;
};

struct VictimSet {
  std::vector<VictimCandidate> victims;
  PlacementPlan plan;  // where the preemptor goes once they are gone
};

// How one search treats a group's entries in the index.
struct VictimGroup {
  bool candidates = false;  // its entries are candidates (a queue that borrows)
  double overshare = 0;     // VictimCandidate::queue_overshare of its entries
};

// One cycle's reclaimable running work, kept for the cycle's many single-pod preemption searches
// (a reclaim cycle on a large cluster makes thousands). Entries are grouped by node, and each
// group (the engine's queues) keeps its best entry on every node in an ordered set, so that a
// search meets nodes in the order of their best candidate without gathering every candidate
// again. Taking a victim updates it; nothing else changes its entries within a cycle. Which
// groups count, and how far each is over its fair share, is the search's to say (VictimGroup).
class VictimIndex {
 public:
  struct Entry {
    VictimCandidate candidate;  // queue_overshare is set by each search
    int32_t group = 0;
  };
  // `entries` holds each possible victim once; `num_workloads` bounds their workload ids.
  VictimIndex(size_t num_nodes, size_t num_groups, size_t num_workloads,
              std::vector<Entry> entries);

  // The workload was taken as a victim: no later search offers it.
  void Remove(WorkloadId w);
  // Entries of the group not yet removed.
  int32_t alive(int32_t group) const { return alive_[static_cast<size_t>(group)]; }
  size_t num_groups() const { return alive_.size(); }

 private:
  friend class MinimalVictimSelector;
  // A group's best entry on a node: lowest priority, then GPU-hours lost, then workload. Ordered
  // by node before workload so that the order of keys is that of node bounds.
  struct Key {
    int32_t priority;
    double gpu_hours_lost;
    int32_t node;
    int32_t workload;
    friend bool operator<(const Key& a, const Key& b) {
      return std::tie(a.priority, a.gpu_hours_lost, a.node, a.workload) <
             std::tie(b.priority, b.gpu_hours_lost, b.node, b.workload);
    }
  };
  void UpdateBest(int32_t group, int32_t node);

  std::vector<Entry> entries_;
  std::vector<uint8_t> removed_;        // per entry
  std::vector<int32_t> entry_of_;       // per workload: its entry, -1 when none
  std::vector<uint32_t> node_begin_;    // node n's entries: node_entries_[begin[n], begin[n+1])
  std::vector<uint32_t> node_entries_;  // entry index, one per (entry, node)
  std::vector<std::set<Key>> best_;     // per group: its best entry on each node
  // Per node: each group's key in best_, for the groups with an entry there.
  std::vector<std::vector<std::pair<int32_t, Key>>> node_best_;
  std::vector<int32_t> alive_;                     // per group
  std::vector<std::vector<int32_t>> group_nodes_;  // per group: the nodes where it has entries
  // Per node, its first candidate among the entries as the last search's groups rank them (the
  // workload, -1 for none) and that entry's group; kept from search to search, and recomputed
  // when first_valid_ is 0. Retarget clears it where the groups' change may move it.
  // They are the searches' memo, kept behind a const index: a search changes no entry.
  mutable std::vector<int32_t> first_;
  mutable std::vector<int32_t> first_group_;
  mutable std::vector<uint8_t> first_valid_;
  mutable std::vector<VictimGroup> last_groups_;
  void Retarget(std::span<const VictimGroup> groups) const;
  // Per node: the search that scored it (stamped, so never cleared).
  mutable std::vector<uint32_t> scored_;
  mutable uint32_t search_ = 0;
};

// One victim search: victims among `candidates` whose release lets the first `pods` pods of
// `preemptor` be placed, counting free capacity and `releasing` (capacity already on its way
// back). `rules` may be null: then any set that makes room will do.
//
// For a preemptor of one pod the engine may pass its VictimIndex of the cycle's reclaimable
// running work, with `groups` marking which of its groups are candidates: then `candidates` holds
// only those outside the index. A selector that does not use the index, or cannot settle the
// search from it, returns nothing, and the engine searches again with every candidate.
struct VictimSearch {
  const ClusterState& state;
  const FeasibilityCache& feasibility;
  const PlacementPolicy& placement;
  const Snapshot& snapshot;
  const Workload& preemptor;
  int32_t pods = 0;
  std::vector<VictimCandidate> candidates = {};
  const CapacityOverlay& releasing;
  const VictimRules* rules = nullptr;
  const VictimIndex* index = nullptr;
  std::span<const VictimGroup> groups = {};
};

class VictimSelector {
 public:
  virtual ~VictimSelector() = default;
  virtual std::string_view name() const = 0;
  virtual std::optional<VictimSet> Select(VictimSearch search) const = 0;
};

// Victims are ranked by: fewest; from the queue furthest over its fair share; lowest priority;
// least GPU-hours lost; then node and workload order (docs/fairness.md, promise 7).
// A single pod: every node its candidates occupy is scored, taking the node's candidates in
// preference order until the pod fits, then sparing every victim whose release proves
// unnecessary; the best node wins. A gang: victims taken in preference order until it fits, then
// pruned the same way. Candidates a rule refuses are passed over.
class MinimalVictimSelector final : public VictimSelector {
 public:
  std::string_view name() const override { return "minimal-victims"; }
  std::optional<VictimSet> Select(VictimSearch search) const override;

 private:
  std::optional<VictimSet> SelectAmong(const ClusterState& state,
                                       const FeasibilityCache& feasibility,
                                       const PlacementPolicy& placement, const Snapshot& snapshot,
                                       const Workload& preemptor, int32_t pods,
                                       std::vector<VictimCandidate> candidates,
                                       const CapacityOverlay& releasing,
                                       const VictimRules* rules) const;
  // For a preemptor of one pod, the choice SelectAmong would make among the index's entries of
  // the groups `groups` marks, plus `extra`: victims, or nothing when this path cannot settle
  // the search.
  std::optional<VictimSet> SelectOnePod(const ClusterState& state,
                                        const FeasibilityCache& feasibility,
                                        const PlacementPolicy& placement, const Snapshot& snapshot,
                                        const Workload& preemptor, const VictimIndex& index,
                                        std::span<const VictimGroup> groups,
                                        std::span<const VictimCandidate> extra,
                                        const CapacityOverlay& releasing,
                                        const VictimRules* rules) const;
};

}  // namespace chamber::core
