#include "core/admission.h"

#include <algorithm>

namespace chamber::core {

AdmissionChecks::AdmissionChecks(const QueueTree& tree, const QueueAccounting& queues,
                                 const ClusterState& state)
    : tree_(tree), queues_(queues), state_(state) {
  for (QueueId q : tree_.top_down())
    for (Resource r : kAllResources)
      if (tree_.queue(q).res(r).lending_limit != kUnlimited) any_lending_limit_ = true;
}

std::string AdmissionChecks::ReservedQuota(QueueId q, const Resources& request) const {
  return QuotaProblem(q, request, /*reserved=*/true);
}

std::string AdmissionChecks::Lending(QueueId q, const Resources& request, bool reserved) const {
  return reserved || !queues_.Borrowing(q, request) || LendingAllows(q, request)
             ? std::string()
             : LendingProblem(q, request);
}

std::string AdmissionChecks::Limit(QueueId q, const Resources& request) const {
  for (QueueId a = q; a.valid(); a = tree_.parent(a)) {
    const Queue& queue = tree_.queue(a);
    for (Resource r : kAllResources) {
      const QueueResource& qr = queue.res(r);
      if (qr.limit == kUnlimited || request[r] == 0) continue;
      if (queues_.usage(a)[r] + request[r] > qr.limit) {
        return "queue " + queue.name + ": needs " + FormatQuantity(r, request[r]) + "; quota " +
               FormatQuantity(r, qr.quota) + ", in use " + FormatQuantity(r, queues_.usage(a)[r]) +
               ", limit " + FormatQuantity(r, qr.limit);
      }
    }
  }
  return {};
}

// Reserved work is checked at every level: a department's quota bounds its teams' reserved
// work together. Elastic work's quota check (`reserved` false) is on the leaf alone: whether it
// borrows decides only the borrowing flag of its bind; reclaim judges quota at the sides.
std::optional<Resource> AdmissionChecks::QuotaExceeded(QueueId q, const Resources& request,
                                                       bool reserved) const {
  for (QueueId a = q; a.valid(); a = reserved ? tree_.parent(a) : QueueId{}) {
    const Resources& used = reserved ? queues_.reserved_usage(a) : queues_.usage(a);
    for (Resource r : kAllResources) {
      if (!tree_.managed(r) || request[r] == 0) continue;
      if (used[r] + request[r] > tree_.effective_quota(a)[r]) return r;
    }
  }
  return std::nullopt;
}

std::string AdmissionChecks::QuotaProblem(QueueId q, const Resources& request,
                                          bool reserved) const {
  if (!QuotaExceeded(q, request, reserved)) return {};
  for (QueueId a = q; a.valid(); a = tree_.parent(a)) {
    const Resources& used = reserved ? queues_.reserved_usage(a) : queues_.usage(a);
    for (Resource r : kAllResources) {
      if (!tree_.managed(r) || request[r] == 0) continue;
      if (used[r] + request[r] <= tree_.effective_quota(a)[r]) continue;
      return "queue " + tree_.queue(a).name + ": needs " + FormatQuantity(r, request[r]) +
             "; quota " + FormatQuantity(r, tree_.effective_quota(a)[r]) +
             (reserved ? ", reserved in use " : ", in use ") + FormatQuantity(r, used[r]);
    }
    if (!reserved) break;
  }
  return {};
}

// Borrowing may not take the idle quota that its owners keep back (quota beyond lending limit).
bool AdmissionChecks::Within(QueueId a, QueueId q) const {
  for (; q.valid(); q = tree_.parent(q))
    if (q == a) return true;
  return false;
}

Resources AdmissionChecks::OwnLock(QueueId a, QueueId q) const {
  Resources out;
  if (Within(a, q)) return out;  // its own quota is no loan to it
  for (Resource r : kAllResources) {
    const int64_t lending = tree_.queue(a).res(r).lending_limit;
    if (lending == kUnlimited) continue;
    const int64_t unused = std::max<int64_t>(0, tree_.effective_quota(a)[r] - queues_.usage(a)[r]);
    out[r] = std::max<int64_t>(0, unused - lending);
  }
  return out;
}

Resources AdmissionChecks::Locked(QueueId a, QueueId q) const {
  Resources out;
  for (QueueId c : tree_.children(a)) out += Locked(c, q);
  return Max(out, OwnLock(a, q));
}

// Borrowing may not take the idle quota that its owners keep back: every queue with a lending
// limit, at any level, keeps its unused effective quota beyond that limit from borrowers outside
// its subtree. A parent keeps at least what its children keep, not that on top.
bool AdmissionChecks::LendingAllows(QueueId q, const Resources& request) const {
  if (!any_lending_limit_) return true;  // nothing is locked; spares a pass over the queues
  Resources locked;
  for (QueueId root : tree_.roots()) locked += Locked(root, q);
  for (Resource r : kAllResources) {
    if (request[r] == 0 || !tree_.managed(r) || locked[r] == 0) continue;
    // Too little free capacity at all is a placement matter, reported as such.
    if (state_.total_free()[r] >= request[r] && state_.total_free()[r] - request[r] < locked[r])
      return false;
  }
  return true;
}

std::string AdmissionChecks::LendingProblem(QueueId q, const Resources& request) const {
  std::string out =
      "borrowing " + FormatResources(request) + " would use quota its owners do not lend:";
  int named = 0;
  for (QueueId a : tree_.top_down()) {
    const Resources lock = OwnLock(a, q);
    for (Resource r : kAllResources) {
      if (lock[r] == 0 || request[r] == 0 || !tree_.managed(r)) continue;
      if (named++ == 3) return out + " and more";
      const QueueResource& qr = tree_.queue(a).res(r);
      const int64_t unused =
          std::max<int64_t>(0, tree_.effective_quota(a)[r] - queues_.usage(a)[r]);
      out += (named > 1 ? "," : "") + std::string(" queue ") + tree_.queue(a).name + " keeps " +
             FormatQuantity(r, lock[r]) + " (lendingLimit " + FormatQuantity(r, qr.lending_limit) +
             " of " + FormatQuantity(r, unused) + " unused)";
    }
  }
  return out;
}

}  // namespace chamber::core
