// QueueAccounting: what each queue holds during a cycle, and its fair share.
//
// It is the only thing in the engine that changes a queue's usage, and it changes it through
// the methods below, each of which keeps the whole subtree's sums in step: a queue's usage is
// what it and every queue beneath it holds. Usage counts running work, work admitted this cycle
// and the requests of preemptors that wait for their victims (nominated). The reported
// allocation leaves the nominated part out.
//
// Like ClusterState, a state kept between cycles runs a cycle's changes under a journal and
// rolls them back after it (BeginCycle, RollBack): the caller applies the decisions it acts on,
// and the next cycle sees them as changes to the snapshot.
#pragma once

#include <cstdint>
#include <vector>

#include "core/fair_share.h"
#include "core/model.h"
#include "core/queue_tree.h"
#include "core/resources.h"

namespace chamber::core {

class QueueAccounting {
 public:
  // `tree` must outlive the accounting.
  explicit QueueAccounting(const QueueTree& tree);

  // --- Mutations: the only way usage changes. ---

  // Running work of leaf `q` that holds `held`; `reserved` when its priority is reserved.
  void AddRunning(QueueId q, const Resources& held, bool reserved);
  void RemoveRunning(QueueId q, const Resources& held, bool reserved);
  // A preemptor of `q` that waits for its victims: its request counts as the queue's usage for
  // the rest of the cycle, but not as its allocation.
  void Nominate(QueueId q, const Resources& request, bool reserved);
  // The cycle's fair share per queue (FairSharePolicy).
  void SetFairShare(std::vector<ShareVector> share) { share_ = std::move(share); }

  // Starts a cycle: no nominations. With `journal`, RollBack returns usage and running counts to
  // what they are now.
  void BeginCycle(bool journal);
  void RollBack();

  // --- Reads. ---

  const Resources& usage(QueueId q) const { return usage_[q.index()]; }
  // The part of usage held by reserved work.
  const Resources& reserved_usage(QueueId q) const { return reserved_usage_[q.index()]; }
  const Resources& nominated(QueueId q) const { return nominated_[q.index()]; }
  Resources allocated(QueueId q) const { return usage_[q.index()] - nominated_[q.index()]; }
  int32_t running(QueueId q) const { return running_[q.index()]; }
  const ShareVector& fair_share(QueueId q) const { return share_[q.index()]; }
  // Holdings plus `waiting` (per queue, what its own waiting work asks), summed up the tree: the
  // demand fair share is computed from.
  std::vector<Resources> Demand(const std::vector<Resources>& waiting) const;

  // Usage changes so far, and the count when the queue's usage last changed: a cache of
  // something derived from a queue's usage is valid while the queue's count stays the same.
  uint64_t changes() const { return changes_; }
  uint64_t changed_at(QueueId q) const { return changed_at_[q.index()]; }

  // --- What usage says (docs/fairness.md). ---

  // Whether the queue's usage stays within its effective quota with `request` added, for each
  // managed resource `request` asks for.
  bool WithinQuota(QueueId q, const Resources& request) const;
  // Whether the queue and every ancestor stay within their effective quotas with `request`.
  bool Guaranteed(QueueId q, const Resources& request) const {
    for (QueueId a = q; a.valid(); a = tree_.parent(a))
      if (!WithinQuota(a, request)) return false;
    return true;
  }
  // Whether the leaf goes beyond its own quota with `request`.
  bool Borrowing(QueueId leaf, const Resources& request) const;
  // Whether the leaf goes beyond the larger of its quota and its fair share with `request`.
  // Checked on the leaf: the leaves' shares add up to their parents', so a parent stays within
  // its share when its leaves do, and one team's borrowing does not defer its siblings.
  bool OverFairShare(QueueId leaf, const Resources& request) const;
  // The queue's share ratio with `delta` added to its usage: the dominant managed resource's
  // usage over fair share.
  double ShareRatio(QueueId q, const Resources& delta) const;
  // From `other` up to `theirs`, the first queue that does not borrow what `request` asks for:
  // reclaim would take it below its quota. Invalid when all of them borrow.
  QueueId FirstNotBorrowing(QueueId other, QueueId theirs, const Resources& request) const;

 private:
  void Add(QueueId q, const Resources& r, bool reserved);
  void Subtract(QueueId q, const Resources& r, bool reserved);

  const QueueTree& tree_;
  std::vector<Resources> usage_;           // per queue, whole subtree
  std::vector<Resources> reserved_usage_;  // per queue, whole subtree
  std::vector<Resources> nominated_;       // per queue, whole subtree
  std::vector<int32_t> running_;           // per leaf queue
  std::vector<ShareVector> share_;         // per queue
  uint64_t changes_ = 0;
  std::vector<uint64_t> changed_at_;  // per queue
  bool journaling_ = false;
  std::vector<Resources> saved_usage_, saved_reserved_usage_;
  std::vector<int32_t> saved_running_;
};

}  // namespace chamber::core
