// AdmissionChecks: whether a waiting workload's request may be admitted as its queues stand,
// before any placement is tried (docs/fairness.md). Each check returns why not, as the message
// of the pending decision it leads to, or an empty string when the request passes:
//   - Limit: the queue and every ancestor stay within their limits (OverQueueLimit);
//   - ReservedQuota: reserved work stays within the effective quota of the queue and every
//     ancestor, counting reserved work only (OverQuota);
//   - Lending: elastic work that borrows does not use idle quota whose owners keep it back
//     through their lending limits (LendingLimit).
// Whether elastic work is deferred to the second pass is QueueAccounting::OverFairShare.
//
// Engine internals: the cycle asks them for every size of every waiting workload it serves, so
// a request that passes costs no allocation.
#pragma once

#include <optional>
#include <string>

#include "core/cluster_state.h"
#include "core/model.h"
#include "core/queue_accounting.h"
#include "core/queue_tree.h"
#include "core/resources.h"

namespace chamber::core {

class AdmissionChecks {
 public:
  // Each must outlive the checks.
  AdmissionChecks(const QueueTree& tree, const QueueAccounting& queues, const ClusterState& state);

  std::string Limit(QueueId q, const Resources& request) const;
  std::string ReservedQuota(QueueId q, const Resources& request) const;
  // `reserved` work never borrows.
  std::string Lending(QueueId q, const Resources& request, bool reserved) const;

 private:
  // With `reserved`, only the queue's reserved work counts: its elastic work is preemptible.
  std::optional<Resource> QuotaExceeded(QueueId q, const Resources& request, bool reserved) const;
  std::string QuotaProblem(QueueId q, const Resources& request, bool reserved) const;
  bool LendingAllows(QueueId q, const Resources& request) const;
  std::string LendingProblem(QueueId q, const Resources& request) const;
  // Whether q is a or lies beneath it.
  bool Within(QueueId a, QueueId q) const;
  // What queue a itself keeps back from borrowers in q, and with everything beneath it.
  Resources OwnLock(QueueId a, QueueId q) const;
  Resources Locked(QueueId a, QueueId q) const;

  const QueueTree& tree_;
  const QueueAccounting& queues_;
  const ClusterState& state_;
  bool any_lending_limit_ = false;  // some queue keeps part of its quota back
};

}  // namespace chamber::core
