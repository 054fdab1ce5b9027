// LoadedWork: what a cycle derives from the snapshot's workloads, kept per workload.
//
// Loading a workload records what the cycle's steps read of it, in compact tables beside the
// snapshot: its queue; for running work, its holdings (claimed in ClusterState and counted in
// QueueAccounting) and whether it could be a victim; for waiting work, its place in its queue's
// order and what it asks for (Ask), with the placement shapes of the sizes it may start with
// interned to ids. A session kept between cycles unloads a workload before it changes and loads
// it again after, so the tables are always what loading the current snapshot afresh gives.
//
// Engine internals: read by the cycle and its parts, never by policies.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cluster_state.h"
#include "core/config.h"
#include "core/decision.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/queue_accounting.h"
#include "core/queue_tree.h"

namespace chamber::core {

// How many workloads ahead of the one at hand loops over workloads start loading the next one's
// records: far enough for the loads to arrive before they are read.
inline constexpr size_t kPrefetchAhead = 8;

// What a waiting workload asks for: what fair share and every admission check read, so that the
// passes decide most workloads that cannot start without reading the Workload itself.
struct Ask {
  int32_t total = 0;         // pods
  int32_t minimum = 0;       // pods the gang cannot start without
  Resources all;             // request of `total` pods
  Resources least;           // request of `minimum` pods
  int32_t shape_all = -1;    // interned shape of `total` pods
  int32_t shape_least = -1;  // and of `minimum` pods
  int32_t priority = 0;
  bool reserved() const { return priority >= kReservedPriority; }
};

// Why a waiting workload cannot be scheduled as it is (bad spec, missing or bad queue).
using PendingWhy = std::pair<PendingReason, std::shared_ptr<const PendingExplanation>>;

class LoadedWork {
 public:
  // What Load keeps of the last queue name it looked up: workloads of one queue tend to come
  // together, so a name is compared with the last one before it is hashed.
  struct QueueLookup {
    std::string_view name;
    QueueId queue;
    bool valid = false;
  };

  // Each must outlive the loaded work; Load claims in `state` and counts in `queues`.
  LoadedWork(const Snapshot& s, const EngineConfig& cfg, const QueueTree& tree, ClusterState& state,
             const FeasibilityCache& feasibility, QueueAccounting& queues);

  // Every workload of the snapshot, none loaded before.
  void LoadAll();
  // One workload; false when it brought a snapshot issue (a placement that cannot be recorded).
  bool Load(WorkloadId w, QueueLookup& lookup);
  // Takes back what Load did for the workload, which has not changed since and brought no
  // issue.
  void Unload(WorkloadId w);
  // Records for a workload appended to the snapshot, or the last one removed.
  void AddSlot();
  void PopSlot();

  // Puts the waiting lists in queue order, once: after that (`keep`) a load inserts in order.
  void SortWaiting(bool keep);
  // Counts again the lowest priority of a queue's running work where the last work of that
  // priority left.
  void RecountLowestPriority();

  const Workload& workload(WorkloadId w) const { return s_.workloads[w.index()]; }
  QueueId queue_of(WorkloadId w) const { return queue_of_[w.index()]; }
  // Waiting work only.
  const Ask& ask(WorkloadId w) const { return ask_[ask_of_[w.index()]]; }
  // Workload::RequestOfFirst(pods) for pods = total or minimum, the only sizes tried.
  const Resources& RequestOf(WorkloadId w, int32_t pods) const {
    const Ask& a = ask(w);
    return pods == a.total ? a.all : a.least;
  }
  int32_t ShapeOf(WorkloadId w, int32_t pods) const {
    const Ask& a = ask(w);
    return pods == a.total ? a.shape_all : a.shape_least;
  }
  // Starts loading what the passes read of waiting workload `w`: where its Ask is, then the
  // Ask and its queue. The first is needed to find the second, so it is asked for further ahead.
  void PrefetchAskIndex(WorkloadId w) const { __builtin_prefetch(&ask_of_[w.index()]); }
  void PrefetchAsk(WorkloadId w) const {
    const Ask* a = &ask_[ask_of_[w.index()]];
    __builtin_prefetch(a);
    __builtin_prefetch(reinterpret_cast<const char*>(a) + sizeof(Ask) - 1);
    __builtin_prefetch(&queue_of_[w.index()]);
  }
  // Shape ids are below this.
  size_t num_shapes() const { return num_shapes_; }

  // Per leaf queue, its waiting workloads in queue order (once SortWaiting ran), and what they
  // ask for together.
  const std::vector<std::vector<WorkloadId>>& waiting() const { return waiting_; }
  const std::vector<Resources>& waiting_demand() const { return waiting_demand_; }
  // Waiting workloads that cannot be scheduled as they are, by workload index.
  const std::map<int32_t, PendingWhy>& invalid() const { return invalid_; }
  bool HasIssues() const { return !issues_of_.empty(); }
  const std::map<int32_t, std::vector<SnapshotIssue>>& issues() const { return issues_of_; }

  // Running work that could be a victim, in index order, and how many per leaf queue.
  const std::vector<WorkloadId>& running() const { return running_ids_; }
  int32_t running_in(QueueId q) const { return running_in_[q.index()]; }
  // The lowest priority of the queue's running work (valid after RecountLowestPriority).
  int32_t lowest_running_priority(QueueId q) const { return running_min_priority_[q.index()]; }
  // What a running workload holds, counted against its queue.
  const Resources& held(WorkloadId w) const { return held_[w.index()]; }
  // Running work outside any queue (its queue is gone): it holds room but is no victim.
  const std::vector<WorkloadId>& unqueued() const { return unqueued_ids_; }
  // Workloads in their grace period, and running work on a failed GPU that each cycle preempts:
  // both in index order, since the capacity they release is offered in that order.
  const std::vector<WorkloadId>& releasing() const { return releasing_ids_; }
  const std::vector<WorkloadId>& faulted() const { return faulted_; }

 private:
  // Queue order: priority, submit time, name, index.
  struct OrderKey {
    int32_t neg_priority;
    WorkloadId id;
    Time submit;
  };
  bool Before(const OrderKey& a, const OrderKey& b) const;
  // Where `key` goes in, or is in, the queue's order (order_keys_ and waiting_, once sorted_).
  std::ptrdiff_t OrderPosition(QueueId q, const OrderKey& key) const;
  void Issue(WorkloadId w, std::string message);
  // A pod set's shape: its constraint set (FeasibilityCache, which names its MIG profile), pods,
  // GPU, CPU and memory request, GPU memory and MIG devices.
  static constexpr size_t kShapeFields = 7;
  // Writes the key into shape_key_, reused so that interning allocates nothing.
  void ShapeKey(const Workload& w, int32_t pods);
  int32_t InternShape(const Workload& w, int32_t pods);
  int32_t InternOneSet(const std::array<int64_t, kShapeFields>& fields);

  const Snapshot& s_;
  const EngineConfig& cfg_;
  const QueueTree& tree_;
  ClusterState& state_;
  const FeasibilityCache& feas_;
  QueueAccounting& queues_;

  std::vector<QueueId> queue_of_;  // per workload
  // One per waiting workload, in load order; ask_of_ finds a workload's. Running work has none.
  std::vector<Ask> ask_;
  std::vector<int32_t> ask_of_;     // per workload: its index in ask_, -1 when it has none
  std::vector<int32_t> free_asks_;  // records in ask_ that no workload uses (after Unload)
  std::vector<std::vector<WorkloadId>> waiting_;  // per leaf queue, in queue order
  // The keys are gathered at load, so that the sort reads a compact array, not the workloads
  // (their names break the rare ties). In load order until SortWaiting; after that (kept) a
  // load inserts in order.
  std::vector<std::vector<OrderKey>> order_keys_;  // per leaf queue
  bool sorted_ = false;                            // order_keys_ and waiting_ in queue order
  std::vector<Resources> waiting_demand_;          // per leaf queue: what its waiting work asks
  std::map<int32_t, PendingWhy> invalid_;
  std::map<int32_t, std::vector<SnapshotIssue>> issues_of_;  // per workload, rare
  std::vector<WorkloadId> releasing_ids_;
  std::vector<WorkloadId> faulted_;
  std::vector<WorkloadId> running_ids_;        // in index order
  std::vector<int32_t> running_in_;            // per queue: its entries in running_ids_
  std::vector<int32_t> running_min_priority_;  // per leaf queue: lowest priority in running_ids_
  std::vector<int32_t> running_at_min_;        // per leaf queue: entries of that priority
  std::vector<uint8_t> min_stale_;             // per leaf queue: the lowest left, recount
  std::vector<Resources> held_;                // per workload: what running work holds
  std::vector<WorkloadId> unqueued_ids_;

  // Shapes (constraint set, pods, request and GPU memory per pod set) interned to ids, so that
  // per-shape caches cost an index per workload rather than a string key.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view k) const { return std::hash<std::string_view>{}(k); }
  };
  std::unordered_map<std::string, int32_t, KeyHash, std::equal_to<>> shape_ids_;
  std::string shape_key_;
  // Shapes whose pods all come from the first pod set (nearly every workload's) by their
  // fields, without building a key: open addressing over a power-of-two table at most half
  // full. Both tables draw ids from one sequence, and a key of the other table always has more
  // than one pod set, so a shape has one id whichever way it was interned.
  struct OneSetShape {
    std::array<int64_t, kShapeFields> fields{};
    int32_t id = -1;  // -1: empty slot
  };
  std::vector<OneSetShape> one_set_shapes_ = std::vector<OneSetShape>(64);
  size_t one_set_count_ = 0;
  size_t num_shapes_ = 0;
};

}  // namespace chamber::core
