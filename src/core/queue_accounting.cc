#include "core/queue_accounting.h"

#include <algorithm>

namespace chamber::core {
namespace {
constexpr double kEpsilon = 1e-9;
}  // namespace

QueueAccounting::QueueAccounting(const QueueTree& tree)
    : tree_(tree),
      usage_(tree.size()),
      reserved_usage_(tree.size()),
      nominated_(tree.size()),
      running_(tree.size(), 0),
      share_(tree.size()),
      changed_at_(tree.size(), 0) {}

void QueueAccounting::Add(QueueId q, const Resources& r, bool reserved) {
  ++changes_;
  for (QueueId a = q; a.valid(); a = tree_.parent(a)) {
    changed_at_[a.index()] = changes_;
    usage_[a.index()] += r;
    if (reserved) reserved_usage_[a.index()] += r;
  }
}

void QueueAccounting::Subtract(QueueId q, const Resources& r, bool reserved) {
  ++changes_;
  for (QueueId a = q; a.valid(); a = tree_.parent(a)) {
    changed_at_[a.index()] = changes_;
    usage_[a.index()] -= r;
    if (reserved) reserved_usage_[a.index()] -= r;
  }
}

void QueueAccounting::AddRunning(QueueId q, const Resources& held, bool reserved) {
  Add(q, held, reserved);
  ++running_[q.index()];
}

void QueueAccounting::RemoveRunning(QueueId q, const Resources& held, bool reserved) {
  Subtract(q, held, reserved);
  --running_[q.index()];
}

void QueueAccounting::Nominate(QueueId q, const Resources& request, bool reserved) {
  Add(q, request, reserved);
  for (QueueId a = q; a.valid(); a = tree_.parent(a)) nominated_[a.index()] += request;
}

void QueueAccounting::BeginCycle(bool journal) {
  nominated_.assign(tree_.size(), {});
  journaling_ = journal;
  if (!journal) return;
  saved_usage_ = usage_;
  saved_reserved_usage_ = reserved_usage_;
  saved_running_ = running_;
}

void QueueAccounting::RollBack() {
  if (!journaling_) return;
  journaling_ = false;
  ++changes_;
  std::fill(changed_at_.begin(), changed_at_.end(), changes_);
  usage_ = saved_usage_;
  reserved_usage_ = saved_reserved_usage_;
  running_ = saved_running_;
}

std::vector<Resources> QueueAccounting::Demand(const std::vector<Resources>& waiting) const {
  std::vector<Resources> demand = usage_;
  for (size_t q = 0; q < waiting.size(); ++q) {
    const Resources& want = waiting[q];
    if (want.IsZero()) continue;
    for (QueueId a{static_cast<int32_t>(q)}; a.valid(); a = tree_.parent(a))
      demand[a.index()] += want;
  }
  return demand;
}

bool QueueAccounting::WithinQuota(QueueId q, const Resources& request) const {
  for (Resource r : kAllResources) {
    if (!tree_.managed(r) || request[r] == 0) continue;
    if (usage_[q.index()][r] + request[r] > tree_.effective_quota(q)[r]) return false;
  }
  return true;
}

bool QueueAccounting::Borrowing(QueueId leaf, const Resources& request) const {
  for (Resource r : kAllResources) {
    if (!tree_.managed(r) || request[r] == 0) continue;
    if (usage_[leaf.index()][r] + request[r] > tree_.queue(leaf).res(r).quota) return true;
  }
  return false;
}

bool QueueAccounting::OverFairShare(QueueId leaf, const Resources& request) const {
  const Queue& queue = tree_.queue(leaf);
  for (Resource r : kAllResources) {
    if (!tree_.managed(r) || request[r] == 0) continue;
    const double entitled = std::max(static_cast<double>(queue.res(r).quota),
                                     share_[leaf.index()][static_cast<int>(r)]);
    if (static_cast<double>(usage_[leaf.index()][r] + request[r]) > entitled + kEpsilon)
      return true;
  }
  return false;
}

double QueueAccounting::ShareRatio(QueueId q, const Resources& delta) const {
  double ratio = 0;
  for (Resource r : kAllResources) {
    if (!tree_.managed(r)) continue;
    const double used = static_cast<double>(usage_[q.index()][r] + delta[r]);
    const double share = share_[q.index()][static_cast<int>(r)];
    if (share > kEpsilon) {
      ratio = std::max(ratio, used / share);
    } else if (used > 0) {
      ratio = std::max(ratio, 1e9);
    }
  }
  return ratio;
}

QueueId QueueAccounting::FirstNotBorrowing(QueueId other, QueueId theirs,
                                           const Resources& request) const {
  for (QueueId b = other;; b = tree_.parent(b)) {
    bool borrows = false;
    for (Resource r : kAllResources)
      if (tree_.managed(r) && request[r] > 0 && usage_[b.index()][r] > tree_.effective_quota(b)[r])
        borrows = true;
    if (!borrows) return b;
    if (b == theirs) return QueueId{};
  }
}

}  // namespace chamber::core
