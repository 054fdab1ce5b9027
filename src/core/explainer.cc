#include "core/explainer.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

namespace chamber::core {

Explainer::Explainer(const Snapshot& s, const EngineConfig& cfg, const Policies& pol,
                     const QueueTree& tree, const ClusterState& state,
                     const FeasibilityCache& feasibility, const QueueAccounting& queues,
                     const LoadedWork& work, PreemptionPlanner& planner)
    : s_(s),
      cfg_(cfg),
      pol_(pol),
      tree_(tree),
      state_(state),
      feas_(feasibility),
      queues_(queues),
      work_(work),
      planner_(planner) {}

void Explainer::BeginCycle() {
  // Loads since the last cycle may have interned new shapes.
  no_fit_.resize(work_.num_shapes());
  fits_without_elastic_.resize(work_.num_shapes(), -1);
}

void Explainer::EndCycle() {
  for (int32_t shape : touched_shapes_) {
    no_fit_[shape].reset();
    fits_without_elastic_[shape] = -1;
  }
  touched_shapes_.clear();
  policy_why_.clear();
}

std::shared_ptr<const PendingExplanation> Explainer::NoFit(WorkloadId w, int32_t pods) {
  const int32_t shape = work_.ShapeOf(w, pods);
  std::shared_ptr<const PendingExplanation>& e = no_fit_[shape];
  if (!e) {
    PlacementExplanation why_not = ExplainNoFit(state_, feas_, wl(w), pods);
    e = std::make_shared<const PendingExplanation>(
        PendingExplanation{std::move(why_not.message), std::move(why_not.details)});
    touched_shapes_.push_back(shape);
  }
  return e;
}

void Explainer::SettleLater(size_t index, WorkloadId w, int32_t pods, int pass) {
  unsettled_.push_back({index, work_.ShapeOf(w, pods), pods, pass});
}

void Explainer::Finish(CycleResult* out) {
  SettlePolicyWaits(out);
  // Queue positions: order among the queue's workloads that still wait.
  std::vector<int32_t> position(s_.workloads.size(), 0);
  std::vector<uint8_t> waits(s_.workloads.size(), 0);
  for (const PendingDecision& p : out->pending) waits[p.workload.index()] = 1;
  for (const std::vector<WorkloadId>& list : work_.waiting()) {
    int32_t n = 0;
    for (WorkloadId w : list)
      if (waits[w.index()]) position[w.index()] = ++n;
  }
  for (PendingDecision& p : out->pending) p.queue_position = position[p.workload.index()];
  // In workload order, by a stable counting sort: each decision is moved once.
  std::vector<size_t> slot(s_.workloads.size() + 1, 0);
  for (const PendingDecision& p : out->pending) ++slot[p.workload.index() + 1];
  std::partial_sum(slot.begin(), slot.end(), slot.begin());
  std::vector<PendingDecision> sorted(out->pending.size());
  for (PendingDecision& p : out->pending) sorted[slot[p.workload.index()]++] = std::move(p);
  out->pending = std::move(sorted);
  FillQueueStatus(out);
}

void Explainer::SettlePolicyWaits(CycleResult* out) {
  if (unsettled_.empty()) return;
  // The cluster without elastic work, as the cycle leaves it: only reserved work holds room
  // (running, or admitted by the cycle), and running work outside any queue; work on its way out
  // holds none.
  without_elastic_.emplace(state_.WithNothingHeld());
  elastic_in_.assign(s_.queues.size(), 0);
  auto hold = [&](const Workload& r) {
    for (size_t p = 0; p < r.placements.size(); ++p) {
      const PodSet* ps = r.PlacementPodSet(p);
      if (ps != nullptr)
        (void)without_elastic_->ClaimExisting(r.placements[p], ps->request, ps->gpu_memory_mib,
                                              ps->mig);
    }
  };
  for (WorkloadId id : work_.running()) {
    const Workload& r = wl(id);
    if (r.reserved()) {
      hold(r);
    } else {
      ++elastic_in_[work_.queue_of(id).index()];
    }
  }
  for (WorkloadId id : work_.unqueued()) hold(wl(id));
  auto admitted = [&](WorkloadId id, const std::vector<PodAssignment>& pods) {
    const Workload& r = wl(id);
    if (!r.reserved()) {
      ++elastic_in_[work_.queue_of(id).index()];
      return;
    }
    for (const PodAssignment& a : pods) {
      const PodSet& ps = r.pod_sets[a.pod_set];
      (void)without_elastic_->ClaimExisting(a.placement, ps.request, ps.gpu_memory_mib, ps.mig);
    }
  };
  for (const BindDecision& b : out->binds) admitted(b.workload, b.pods);
  for (const ResumeDecision& r : out->resumes) admitted(r.workload, r.pods);
  for (const Unsettled& u : unsettled_) {
    PendingDecision& p = out->pending[u.index];
    if (!FitsWithoutElasticWork(p.workload, u.shape, u.pods)) continue;
    const auto& [reason, e] = PolicyWait(p.workload, u.shape, u.pods, u.pass);
    p.reason = reason;
    p.explanation = e;
  }
  unsettled_.clear();
  without_elastic_.reset();
}

bool Explainer::FitsWithoutElasticWork(WorkloadId w, int32_t shape, int32_t pods) {
  int8_t& known = fits_without_elastic_[shape];
  if (known < 0) {
    known = pol_.placement->Place(*without_elastic_, feas_, wl(w), pods, nullptr) ? 1 : 0;
    touched_shapes_.push_back(shape);
  }
  return known == 1;
}

const PendingWhy& Explainer::PolicyWait(WorkloadId w, int32_t shape, int32_t pods, int pass) {
  const QueueId q = work_.queue_of(w);
  const uint64_t key = uint64_t{static_cast<uint32_t>(q.value)} << 34 |
                       uint64_t{static_cast<uint32_t>(pass)} << 32 | static_cast<uint32_t>(shape);
  auto& cached = policy_why_[key];
  if (cached.second) return cached;
  const Resources& req = work_.RequestOf(w, pods);
  auto ratio = [](double x) {
    if (x >= 1e8) return std::string("more than all");  // no fair share to measure against
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", x);
    return std::string(buf);
  };
  // What keeps each queue's elastic running work from being a victim of this workload: in the
  // deserved pass the reclaim rules; beyond its fair share (pass 2) reclaim is not tried at all,
  // and the rules still say which queues keep their room by quota and which by fair share.
  // The causes as text, the first few only: a large tree would otherwise spell out every queue
  // for every shape that waits. Queues under one department that keeps its quota name it once.
  constexpr size_t kMostCauses = 6;
  std::vector<std::string> causes;
  size_t more = 0;
  auto cause = [&](auto text) {
    if (causes.size() >= kMostCauses) {
      ++more;
      return;
    }
    std::string c = text();
    if (std::find(causes.begin(), causes.end(), c) == causes.end()) causes.push_back(std::move(c));
  };
  bool quota_cause = false;
  bool fair_cause = false;
  const QueuePreemption& policy = tree_.queue(q).preemption;
  if (!planner_.DelayPassed(w)) {
    quota_cause = true;
    const Duration left = policy.delay - (s_.now - wl(w).submit_time);
    cause([&] {
      return std::string("queue " + tree_.queue(q).name + " lets its work preempt only after " +
                         std::to_string(policy.delay.count() / 1000) + "s of waiting, " +
                         std::to_string((left.count() + 999) / 1000) + "s from now");
    });
  }
  for (QueueId other : tree_.top_down()) {
    if (!tree_.leaf(other) || elastic_in_[other.index()] == 0) continue;
    const std::string& name = tree_.queue(other).name;
    if (other == q) {
      if (!cfg_.priority_preemption_enabled) {
        cause([&] { return std::string("priority preemption is turned off"); });
      } else if (policy.within_queue == WithinQueuePreemption::kNever) {
        cause([&] {
          return std::string("queue " + name + "'s policy preempts none of its own work");
        });
      } else {
        cause([&] {
          return std::string("queue " + name + "'s own running work is not of lower priority");
        });
      }
      continue;
    }
    if (pass == 1 && !cfg_.reclaim_enabled) {
      quota_cause = true;
      cause([&] { return std::string("reclaim is turned off"); });
      continue;
    }
    if (pass == 1 && policy.reclaim == ReclaimPreemption::kNever) {
      quota_cause = true;
      cause([&] {
        return std::string("queue " + tree_.queue(q).name + "'s policy reclaims from no queue");
      });
      continue;
    }
    // Plain variables, not a structured binding: the lambdas below capture them, which clang
    // before 16 (the fuzz build's) does not allow for a binding.
    const std::pair<QueueId, QueueId> sides = tree_.Sides(q, other);
    const QueueId mine = sides.first;
    const QueueId theirs = sides.second;
    const QueueId within = mine.valid() ? queues_.FirstNotBorrowing(other, theirs, req) : QueueId{};
    if (within.valid()) {
      quota_cause = true;
      cause([&] {
        return std::string(
            "queue " + tree_.queue(within).name + " holds " +
            FormatQuantity(Resource::kGpu, queues_.usage(within).gpu_milli()) + ", quota " +
            FormatQuantity(Resource::kGpu, tree_.effective_quota(within).gpu_milli()) +
            " (reclaim never takes a queue below its quota)");
      });
    } else if (planner_.BorrowingPreempts(q) && (pass == 2 || !queues_.WithinQuota(mine, req))) {
      quota_cause = true;
      cause([&] {
        return std::string("queue " + name + "'s work is protected, or not of lower priority or " +
                           "above the whileBorrowing threshold of queue " + tree_.queue(q).name);
      });
    } else if (pass == 2) {
      fair_cause = true;
      cause([&] {
        return std::string("queue " + tree_.queue(theirs).name + " is at " +
                           ratio(queues_.ShareRatio(theirs, {})) + " of its fair share");
      });
    } else if (!queues_.WithinQuota(mine, req) && !cfg_.fair_share_reclaim_enabled) {
      quota_cause = true;
      cause([&] {
        return std::string("queue " + tree_.queue(mine).name +
                           " would be beyond its quota, and fair-share reclaim is turned off");
      });
    } else if (!queues_.WithinQuota(mine, req) &&
               queues_.ShareRatio(mine, req) > queues_.ShareRatio(theirs, {})) {
      fair_cause = true;
      cause([&] {
        return std::string("queue " + tree_.queue(mine).name + " would be at " +
                           ratio(queues_.ShareRatio(mine, req)) + " of its fair share, queue " +
                           tree_.queue(theirs).name + " is at " +
                           ratio(queues_.ShareRatio(theirs, {})));
      });
    } else {
      // The queue may be reclaimed from, but none of its work alone: say which rule refuses.
      const PreemptionPlanner::Refusals refusals =
          planner_.CountRefusals(w, other, theirs, req, pass);
      const int32_t open = refusals.open, by_quota = refusals.by_quota,
                    by_share = refusals.by_share;
      const double lowest_after = refusals.lowest_after;
      const bool lower_only = policy.reclaim == ReclaimPreemption::kLowerPriority;
      if (open == 0) {
        quota_cause = true;
        cause([&] {
          return std::string("queue " + name +
                             (lower_only ? "'s running work is not of lower priority, or protected "
                                           "(minimum runtime or preemption budget)"
                                         : "'s running work is protected (minimum runtime or "
                                           "preemption budget)"));
        });
      } else if (by_share > 0 && by_quota == 0) {
        fair_cause = true;
        cause([&] {
          return std::string("queue " + tree_.queue(mine).name + " would be at " +
                             ratio(queues_.ShareRatio(mine, req)) +
                             " of its fair share, and taking " + name +
                             "'s work would leave queue " + tree_.queue(theirs).name + " at " +
                             ratio(lowest_after));
        });
      } else if (by_quota > 0 && by_share == 0) {
        quota_cause = true;
        cause([&] {
          return std::string("taking queue " + name +
                             "'s work would leave it or its department below its quota");
        });
      } else {
        quota_cause = true;
        cause([&] {
          return std::string("queue " + name +
                             "'s work makes no room without breaking a quota, a limit or the "
                             "fair-share rule");
        });
      }
    }
  }
  std::string message;
  const bool fair_only = fair_cause && !quota_cause;
  if (fair_only) {
    message = "queue " + tree_.queue(q).name + " would be at " + ratio(queues_.ShareRatio(q, req)) +
              " of its fair share with it, and the queues holding the room are no further over "
              "theirs";
  } else {
    message = "the room is held by work it may not preempt";
  }
  for (size_t i = 0; i < causes.size() && i < 3; ++i) message += (i ? "; " : ": ") + causes[i];
  if (causes.size() + more > 3)
    message += "; and " + std::to_string(causes.size() + more - 3) + " more";
  if (more > 0) causes.push_back("and " + std::to_string(more) + " more");
  const PendingReason reason =
      fair_only ? PendingReason::kFairShare : PendingReason::kPreemptionNotAllowed;
  cached = {reason, std::make_shared<const PendingExplanation>(
                        PendingExplanation{std::move(message), std::move(causes)})};
  return cached;
}

void Explainer::FillQueueStatus(CycleResult* out) const {
  const size_t nq = s_.queues.size();
  // Borrowed capacity comes first from capacity no queue is guaranteed, then from lenders in
  // proportion to what each lends.
  Resources quota_sum, borrowed_sum, lendable_sum;
  std::vector<Resources> lendable(nq);
  for (QueueId q : tree_.top_down()) {
    if (!tree_.leaf(q)) continue;
    for (Resource r : kAllResources) {
      const QueueResource& qr = tree_.queue(q).res(r);
      const int64_t used = queues_.allocated(q)[r];
      quota_sum[r] += qr.quota;
      borrowed_sum[r] += std::max<int64_t>(0, used - qr.quota);
      int64_t unused = std::max<int64_t>(0, qr.quota - used);
      if (qr.lending_limit != kUnlimited) unused = std::min(unused, qr.lending_limit);
      lendable[q.index()][r] = unused;
      lendable_sum[r] += unused;
    }
  }
  Resources from_lenders;
  for (Resource r : kAllResources) {
    const int64_t unowned = std::max<int64_t>(0, state_.capacity()[r] - quota_sum[r]);
    from_lenders[r] = std::max<int64_t>(0, borrowed_sum[r] - unowned);
  }
  std::vector<int32_t> pending_count(nq, 0);
  for (const PendingDecision& p : out->pending) {
    for (QueueId a = work_.queue_of(p.workload); a.valid(); a = tree_.parent(a))
      ++pending_count[a.index()];
  }
  std::vector<QueueStatus> status(nq);
  for (size_t i = 0; i < nq; ++i) {
    const QueueId q{static_cast<int32_t>(i)};
    QueueStatus& st = status[i];
    st.queue = q;
    st.name = s_.queues[i].name;
    st.error = tree_.error(q);
    st.pending_workloads = pending_count[i];
    if (!tree_.valid(q)) continue;
    st.allocated = queues_.allocated(q);
    st.fair_share = queues_.fair_share(q);
    for (Resource r : kAllResources) {
      st.borrowed[r] = std::max<int64_t>(0, st.allocated[r] - tree_.effective_quota(q)[r]);
      if (tree_.leaf(q) && lendable_sum[r] > 0) {
        const double part =
            static_cast<double>(lendable[i][r]) / static_cast<double>(lendable_sum[r]);
        st.lent[r] = std::min(lendable[i][r],
                              static_cast<int64_t>(part * static_cast<double>(from_lenders[r])));
      }
    }
  }
  // Parents: running counts and lent amounts roll up.
  std::vector<QueueId> order = tree_.top_down();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const QueueId q = *it;
    if (tree_.leaf(q)) status[q.index()].running_workloads = queues_.running(q);
    const QueueId p = tree_.parent(q);
    if (p.valid()) {
      status[p.index()].running_workloads += status[q.index()].running_workloads;
      status[p.index()].lent += status[q.index()].lent;
    }
  }
  out->queues = std::move(status);
}

}  // namespace chamber::core
