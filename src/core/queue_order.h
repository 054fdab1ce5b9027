// The order queues take turns in (EngineConfig::queue_order), as sorters.
//
// A pass walks the queue tree from the roots, at each level taking the active queue (one with
// work left in the pass beneath it) that comes first: highest queue priority, then the lowest
// sort key, then name. A sorter says what the key is:
//   - FairShareSorter: how far along its fair share the queue is, the dominant resource's usage
//     over share, plus its part of the cluster it used recently when decay is on;
//   - DominantShareSorter: its share of the cluster's dominant resource (DRF);
//   - OldestHeadSorter: when the next workload beneath it was submitted (FIFO across queues).
// A sorter also says how far over its share each queue stands, which reclaim reads to take from
// the queue furthest over first.
//
// The cycle picks the sorter once per cycle and runs its passes with the concrete type, so the
// per-workload walk calls no virtual function.
#pragma once

#include <cstdint>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "core/cluster_state.h"
#include "core/config.h"
#include "core/model.h"
#include "core/queue_accounting.h"
#include "core/queue_tree.h"

namespace chamber::core {

// One pass's turns: each leaf queue's list of workloads, how far the pass has served it, and
// which queues still have work beneath them.
class QueueTurns {
 public:
  QueueTurns(const QueueTree& tree, const std::vector<Queue>& queues);

  // Starts a pass over `lists` (per leaf queue); `lists` must outlive the pass.
  void Begin(const std::vector<std::vector<WorkloadId>>& lists);
  const std::vector<WorkloadId>& list(QueueId leaf) const { return (*lists_)[leaf.index()]; }
  // The position of the leaf's next workload in its list.
  size_t& cursor(QueueId leaf) { return cursor_[leaf.index()]; }
  size_t cursor(QueueId leaf) const { return cursor_[leaf.index()]; }
  bool active(QueueId leaf) const { return leaf_active_[leaf.index()] != 0; }
  // Active leaves beneath the queue.
  int32_t active_beneath(QueueId q) const { return active_[q.index()]; }
  // The leaf has no work left in this pass.
  void Finish(QueueId leaf) { SetActive(leaf, false); }

  // The leaf served next: walks down from the roots, at each level taking the queue that comes
  // first. Invalid when no work is left.
  template <typename Sorter>
  QueueId Pick(const Sorter& sorter) const {
    const std::vector<QueueId>* level = &tree_.roots();
    QueueId chosen;
    while (true) {
      QueueId best;
      std::tuple<int32_t, double, int32_t> best_key;
      for (QueueId q : *level) {
        if (active_[q.index()] == 0) continue;
        auto key =
            std::tuple(-tree_.queue(q).priority, sorter.Key(q, *this), name_rank_[q.index()]);
        if (!best.valid() || key < best_key) {
          best = q;
          best_key = key;
        }
      }
      if (!best.valid()) return chosen.valid() && tree_.leaf(chosen) ? chosen : QueueId{};
      chosen = best;
      if (tree_.leaf(best)) return best;
      level = &tree_.children(best);
    }
  }

 private:
  void SetActive(QueueId leaf, bool active);

  const QueueTree& tree_;
  std::vector<int32_t> name_rank_;  // per queue: position of its name in sorted order
  const std::vector<std::vector<WorkloadId>>* lists_ = nullptr;
  std::vector<size_t> cursor_;        // per queue
  std::vector<int32_t> active_;       // per queue: active leaves beneath
  std::vector<uint8_t> leaf_active_;  // per queue
};

class QueueSorter {
 public:
  virtual ~QueueSorter() = default;
  virtual std::string_view name() const = 0;
  // Once per cycle, after the fair shares are set.
  virtual void BeginCycle() = 0;
  // How far the queue stands over its share, as this order measures it (higher: further over).
  virtual double Standing(QueueId q) const = 0;
  // The queue's place among its active siblings of equal priority: lower first.
  virtual double Key(QueueId q, const QueueTurns& turns) const = 0;
  // Whether keys move as workloads are served, and not only when usage changes.
  virtual bool MovesWithHeads() const = 0;
};

// A value per queue derived from its usage, kept until the queue's usage changes: a pass asks
// for every sibling's key at each step.
class StandingCache {
 public:
  void Reset(size_t num_queues);
  template <typename Compute>
  double Get(QueueId q, const QueueAccounting& queues, Compute&& compute) const {
    if (at_[q.index()] != queues.changed_at(q)) {
      value_[q.index()] = compute();
      at_[q.index()] = queues.changed_at(q);
    }
    return value_[q.index()];
  }

 private:
  static constexpr uint64_t kNotCached = ~uint64_t{0};
  mutable std::vector<double> value_;
  mutable std::vector<uint64_t> at_;  // per queue: QueueAccounting::changed_at of value_
};

class FairShareSorter final : public QueueSorter {
 public:
  // Each must outlive the sorter.
  FairShareSorter(const EngineConfig& cfg, const QueueTree& tree, const std::vector<Queue>& queues,
                  const ClusterState& state, const QueueAccounting& accounting);
  std::string_view name() const override { return "fair-share"; }
  void BeginCycle() override;
  double Standing(QueueId q) const override {
    return cache_.Get(q, accounting_, [&] { return Compute(q); });
  }
  double Key(QueueId q, const QueueTurns& /*turns*/) const override { return Standing(q); }
  bool MovesWithHeads() const override { return false; }

 private:
  double Compute(QueueId q) const;

  const EngineConfig& cfg_;
  const QueueTree& tree_;
  const std::vector<Queue>& queues_;
  const ClusterState& state_;
  const QueueAccounting& accounting_;
  std::vector<double> decayed_;  // per queue, whole subtree: part of the cluster used recently
  StandingCache cache_;
};

class DominantShareSorter final : public QueueSorter {
 public:
  DominantShareSorter(const QueueTree& tree, const ClusterState& state,
                      const QueueAccounting& accounting);
  std::string_view name() const override { return "dominant-share"; }
  void BeginCycle() override { cache_.Reset(tree_.size()); }
  double Standing(QueueId q) const override {
    return cache_.Get(q, accounting_, [&] { return Compute(q); });
  }
  double Key(QueueId q, const QueueTurns& /*turns*/) const override { return Standing(q); }
  bool MovesWithHeads() const override { return false; }

 private:
  double Compute(QueueId q) const;

  const QueueTree& tree_;
  const ClusterState& state_;
  const QueueAccounting& accounting_;
  StandingCache cache_;
};

// Stands queues by fair share, as FairShareSorter does.
class OldestHeadSorter final : public QueueSorter {
 public:
  OldestHeadSorter(const EngineConfig& cfg, const QueueTree& tree, const Snapshot& snapshot,
                   const ClusterState& state, const QueueAccounting& accounting);
  std::string_view name() const override { return "oldest-head"; }
  void BeginCycle() override { standing_.BeginCycle(); }
  double Standing(QueueId q) const override { return standing_.Standing(q); }
  // Submit time (ms) of the next workload to serve in the queue's subtree.
  double Key(QueueId q, const QueueTurns& turns) const override;
  bool MovesWithHeads() const override { return true; }

 private:
  const QueueTree& tree_;
  const Snapshot& snapshot_;
  FairShareSorter standing_;
};

// The sorter EngineConfig::queue_order names.
using AnySorter = std::variant<FairShareSorter, DominantShareSorter, OldestHeadSorter>;
AnySorter MakeSorter(const EngineConfig& cfg, const QueueTree& tree, const Snapshot& snapshot,
                     const ClusterState& state, const QueueAccounting& accounting);
inline const QueueSorter& AsSorter(const AnySorter& s) {
  return std::visit([](const QueueSorter& x) -> const QueueSorter& { return x; }, s);
}
inline QueueSorter& AsSorter(AnySorter& s) {
  return std::visit([](QueueSorter& x) -> QueueSorter& { return x; }, s);
}

}  // namespace chamber::core
