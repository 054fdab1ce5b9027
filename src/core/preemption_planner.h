// PreemptionPlanner: whom a waiting workload may preempt, and the victims it takes.
//
// The engine's half of preemption (docs/fairness.md): which running work is a candidate for a
// preemptor, by priority within its queue or by reclaim from queues that borrow, and the rules
// a whole victim set must keep (VictimRules: the quota floor, no flip, the preemptor's limits).
// The VictimSelector policy chooses among the candidates. The planner keeps, for one cycle, the
// running work as searches read it (gathered at the first search), the victims taken so far,
// the searches known to find nothing, and the victim index that answers single-pod searches
// once enough of them were made.
//
// Engine internals: the cycle drives it; policies see only candidates and rules.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/cluster_state.h"
#include "core/config.h"
#include "core/decision.h"
#include "core/engine.h"
#include "core/loaded_work.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/preemption.h"
#include "core/queue_accounting.h"
#include "core/queue_order.h"
#include "core/queue_tree.h"

namespace chamber::core {

// GPU time since the workload's last checkpoint (or start).
double GpuHoursLost(const Workload& w, Time now);

class PreemptionPlanner {
 public:
  // Each must outlive the planner.
  PreemptionPlanner(const Snapshot& s, const EngineConfig& cfg, const Policies& pol,
                    const EngineTuning& tune, const QueueTree& tree, const ClusterState& state,
                    const FeasibilityCache& feasibility, const QueueAccounting& queues,
                    const LoadedWork& work, const AnySorter& sorter);
  ~PreemptionPlanner();

  // Starts a cycle. EndCycle forgets what a kept cycle found, its `preemptions` included.
  void BeginCycle();
  void EndCycle(std::span<const PreemptDecision> preemptions);

  // Whether its queue's policy lets waiting workload `w` preempt any of the queue's running work.
  bool MayPreemptWithin(WorkloadId w) const;
  // Whether `w` has waited its queue's preemption delay.
  bool DelayPassed(WorkloadId w) const;
  // Whether q's policy lets work that would borrow preempt (fair-share reclaim off).
  bool BorrowingPreempts(QueueId q) const;

  // A preemptor's candidates, gathered before the search. A single pod's search may use the
  // cycle's victim index (`indexed`): then `candidates` holds only those of its own queue.
  struct Search {
    bool reclaim = false;  // it may reclaim from other queues
    bool indexed = false;
    bool any_candidate = false;
    std::vector<VictimCandidate> candidates;
  };
  // For waiting workload `w` in `pass` asking `first_request` (its smallest size). At its limit
  // (`at_limit`), only its own queue's work can make room under it.
  Search Gather(WorkloadId w, int pass, bool at_limit, const Resources& first_request);

  struct Preemption {
    int32_t pods = 0;  // the size it starts with
    std::vector<VictimCandidate> victims;
    PlacementPlan plan;  // where it goes once they are gone
  };
  // The victims of the first of `sizes` for which a set is found, counting `releasing` as free.
  std::optional<Preemption> Plan(WorkloadId w, int pass, bool at_limit, Search& search,
                                 std::span<const int32_t> sizes, const CapacityOverlay& releasing,
                                 CycleStats& stats);
  // The workload is a victim: no later search offers it.
  void MarkVictim(WorkloadId v);

  // Of queue `other`'s running work that reclaim could take for `w` asking `request` (the
  // queues meeting at `theirs`), how much the rules refuse when taken alone, and how: for
  // explanations.
  struct Refusals {
    int32_t open = 0;  // not shielded, of a priority reclaim may take
    int32_t by_quota = 0;
    int32_t by_share = 0;
    // The lowest share ratio `theirs` is left at by a refusal on fair share.
    double lowest_after = std::numeric_limits<double>::infinity();
  };
  Refusals CountRefusals(WorkloadId w, QueueId other, QueueId theirs, const Resources& request,
                         int pass);

 private:
  class Rules;
  // A running workload as victim selection reads it, gathered from the scattered Workload
  // structs once per cycle.
  struct Running {
    WorkloadId id;
    int32_t priority = 0;
    bool shielded = false;  // Shielded(); preempted this cycle is victim_
    double gpu_hours_lost = 0;
    uint32_t first_placement = 0;  // its placements in running_placements_
    uint32_t num_placements = 0;
    Resources held;  // what it holds, counted against its queue
    Time submit_time{0};
  };
  VictimCandidate CandidateOf(const Running& v, PreemptReason reason, double overshare) const {
    return {
        v.id,   reason,         v.priority, v.gpu_hours_lost, overshare, work_.queue_of(v.id).value,
        v.held, PlacementsOf(v)};
  }
  std::span<const PodPlacement> PlacementsOf(const Running& v) const {
    return std::span<const PodPlacement>(running_placements_)
        .subspan(v.first_placement, v.num_placements);
  }
  const Workload& wl(WorkloadId w) const { return s_.workloads[w.index()]; }
  double Standing(QueueId q) const { return AsSorter(sorter_).Standing(q); }

  // Whether running work may not be preempted whatever this cycle does: reserved, younger than
  // the minimum runtime, or preempted too often lately.
  bool Shielded(const Workload& w) const;
  // Fills running_ from LoadedWork::running, once, when the cycle's first search reads it.
  void LoadRunning();
  std::vector<VictimCandidate> Candidates(WorkloadId w, bool reclaim, const Resources& req,
                                          int pass);
  // The part of Candidates from the workload's own queue: lower-priority work it may preempt.
  void PriorityCandidates(WorkloadId w, std::vector<VictimCandidate>* out);
  // Whether reclaim may take from `other`'s running work for a workload of `q` asking `req`:
  // `other` borrows what `req` asks for at every level up to its side, and either `q`'s side
  // stays within quota with `req` or it stays no further over its fair share than `other`'s
  // side. Rules checks the same for a whole victim set.
  enum class ReclaimPath { kNone, kQuota, kFairShare, kWhileBorrowing };
  ReclaimPath ReclaimFrom(QueueId q, QueueId other, const Resources& req, int pass) const;
  // Whether q's policy lets it take a victim of priority `victim` for a preemptor of priority
  // `preemptor` while borrowing.
  bool MayTakeWhileBorrowing(QueueId q, int32_t preemptor, int32_t victim) const;
  // Builds index_ from the running work that reclaim could still take.
  void BuildVictimIndex();
  // groups_ for a search by a workload of `q`; false when no group offers a candidate.
  bool MarkReclaimGroups(QueueId q, bool reclaim, const Resources& req, int pass);
  // At its limit with room already free, the victims need only free the limit.
  std::optional<Preemption> PlanAtLimit(WorkloadId w, int pass, const Search& search,
                                        std::span<const int32_t> sizes);

  const Snapshot& s_;
  const EngineConfig& cfg_;
  const Policies& pol_;
  const EngineTuning& tune_;
  const QueueTree& tree_;
  const ClusterState& state_;
  const FeasibilityCache& feas_;
  const QueueAccounting& queues_;
  const LoadedWork& work_;
  const AnySorter& sorter_;

  // Running work that may be a victim (LoadedWork::running). Most cycles read none of it, even
  // when work waits (no queue borrows, no waiting work outranks running work of its queue), so
  // running_ is filled only when a victim search first reads it (LoadRunning).
  bool running_loaded_ = false;
  std::vector<std::vector<Running>> running_;     // per leaf queue: possible victims
  std::vector<PodPlacement> running_placements_;  // of every Running entry, side by side
  std::vector<uint8_t> victim_;  // per workload: preempted this cycle (cleared by EndCycle)
  std::unordered_set<uint64_t> no_victims_;  // queue << 32 | shape: no victim set found
  // Rules' tables, kept from search to search so that a search allocates none.
  std::vector<Resources> rules_taken_;
  std::vector<std::pair<bool, std::pair<QueueId, QueueId>>> rules_sides_;
  // Reclaimable running work for single-pod searches, once a cycle has made enough of them.
  std::unique_ptr<VictimIndex> index_;
  int32_t one_pod_searches_ = 0;
  std::vector<VictimGroup> groups_;  // per queue, for the search at hand
};

}  // namespace chamber::core
