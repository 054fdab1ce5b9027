#include "core/queue_order.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/fair_share.h"

namespace chamber::core {

QueueTurns::QueueTurns(const QueueTree& tree, const std::vector<Queue>& queues) : tree_(tree) {
  // Valid queues have unique names, so comparing ranks orders them exactly as comparing names.
  const size_t nq = queues.size();
  std::vector<int32_t> by_name(nq);
  std::iota(by_name.begin(), by_name.end(), 0);
  std::sort(by_name.begin(), by_name.end(),
            [&](int32_t a, int32_t b) { return queues[a].name < queues[b].name; });
  name_rank_.assign(nq, 0);
  for (size_t i = 0; i < nq; ++i) name_rank_[by_name[i]] = static_cast<int32_t>(i);
}

void QueueTurns::Begin(const std::vector<std::vector<WorkloadId>>& lists) {
  const size_t nq = lists.size();
  lists_ = &lists;
  active_.assign(nq, 0);
  leaf_active_.assign(nq, 0);
  cursor_.assign(nq, 0);
  for (size_t q = 0; q < nq; ++q)
    if (!lists[q].empty()) SetActive(QueueId{static_cast<int32_t>(q)}, true);
}

void QueueTurns::SetActive(QueueId leaf, bool active) {
  if (static_cast<bool>(leaf_active_[leaf.index()]) == active) return;
  leaf_active_[leaf.index()] = active ? 1 : 0;
  for (QueueId a = leaf; a.valid(); a = tree_.parent(a)) active_[a.index()] += active ? 1 : -1;
}

void StandingCache::Reset(size_t num_queues) {
  value_.assign(num_queues, 0);
  at_.assign(num_queues, kNotCached);
}

FairShareSorter::FairShareSorter(const EngineConfig& cfg, const QueueTree& tree,
                                 const std::vector<Queue>& queues, const ClusterState& state,
                                 const QueueAccounting& accounting)
    : cfg_(cfg), tree_(tree), queues_(queues), state_(state), accounting_(accounting) {
  cache_.Reset(tree.size());
}

void FairShareSorter::BeginCycle() {
  cache_.Reset(tree_.size());
  decayed_.assign(tree_.size(), 0);
  if (cfg_.usage_half_life.count() <= 0) return;
  const double gpus = GpusOf(state_.capacity().gpu_milli());
  for (size_t q = 0; q < tree_.size(); ++q) {
    const QueueId id{static_cast<int32_t>(q)};
    if (!tree_.valid(id) || !tree_.leaf(id)) continue;
    const double part = DecayedUsageFraction(queues_[q].decayed_usage, gpus, cfg_.usage_half_life);
    for (QueueId a = id; a.valid(); a = tree_.parent(a)) decayed_[a.index()] += part;
  }
}

double FairShareSorter::Compute(QueueId q) const {
  double ratio = accounting_.ShareRatio(q, {});
  if (cfg_.usage_weight > 0) ratio += cfg_.usage_weight * decayed_[q.index()];
  return ratio;
}

DominantShareSorter::DominantShareSorter(const QueueTree& tree, const ClusterState& state,
                                         const QueueAccounting& accounting)
    : tree_(tree), state_(state), accounting_(accounting) {
  cache_.Reset(tree.size());
}

double DominantShareSorter::Compute(QueueId q) const {
  double ratio = 0;
  for (Resource r : kAllResources) {
    const double cap = static_cast<double>(state_.capacity()[r]);
    if (tree_.managed(r) && cap > 0)
      ratio = std::max(ratio, static_cast<double>(accounting_.usage(q)[r]) / cap);
  }
  return ratio;
}

OldestHeadSorter::OldestHeadSorter(const EngineConfig& cfg, const QueueTree& tree,
                                   const Snapshot& snapshot, const ClusterState& state,
                                   const QueueAccounting& accounting)
    : tree_(tree), snapshot_(snapshot), standing_(cfg, tree, snapshot.queues, state, accounting) {}

double OldestHeadSorter::Key(QueueId q, const QueueTurns& turns) const {
  if (tree_.leaf(q)) {
    const std::vector<WorkloadId>& list = turns.list(q);
    const size_t c = turns.cursor(q);
    return c < list.size()
               ? static_cast<double>(snapshot_.workloads[list[c].index()].submit_time.count())
               : std::numeric_limits<double>::infinity();
  }
  double oldest = std::numeric_limits<double>::infinity();
  for (QueueId child : tree_.children(q))
    if (turns.active_beneath(child) > 0) oldest = std::min(oldest, Key(child, turns));
  return oldest;
}

AnySorter MakeSorter(const EngineConfig& cfg, const QueueTree& tree, const Snapshot& snapshot,
                     const ClusterState& state, const QueueAccounting& accounting) {
  switch (cfg.queue_order) {
    case QueueOrder::kDominantShare:
      return AnySorter(std::in_place_type<DominantShareSorter>, tree, state, accounting);
    case QueueOrder::kOldestHead:
      return AnySorter(std::in_place_type<OldestHeadSorter>, cfg, tree, snapshot, state,
                       accounting);
    case QueueOrder::kFairShare:
      break;
  }
  return AnySorter(std::in_place_type<FairShareSorter>, cfg, tree, snapshot.queues, state,
                   accounting);
}

}  // namespace chamber::core
