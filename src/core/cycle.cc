#include "core/cycle.h"

#include <array>
#include <optional>
#include <span>
#include <utility>
#include <variant>

namespace chamber::core {
namespace {

// At most two pod counts, in the order tried.
class SmallSizes {
 public:
  void push_back(int32_t n) { v_[size_++] = n; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int32_t& operator[](size_t i) { return v_[i]; }
  int32_t back() const { return v_[size_ - 1]; }
  void resize(size_t n) { size_ = n; }
  const int32_t* begin() const { return v_.data(); }
  const int32_t* end() const { return v_.data() + size_; }

 private:
  std::array<int32_t, 2> v_{};
  size_t size_ = 0;
};

}  // namespace

void Cycle::ComputeFairShare() {
  queues_.SetFairShare(
      pol_.fair_share->Compute(tree_, queues_.Demand(work_.waiting_demand()), state_.capacity()));
  AsSorter(sorter_).BeginCycle();
}

template <typename Sorter>
void Cycle::Serve(const Sorter& sorter, const std::vector<std::vector<WorkloadId>>& lists, int pass,
                  std::vector<std::vector<WorkloadId>>* deferred) {
  turns_.Begin(lists);

  // The queue order is a function of usage and of which leaves still have work; in the fair
  // share orders (not oldest head, which moves with every workload served) a leaf whose
  // workload changed no usage and which still has work is picked again, so it is kept without
  // walking the tree. Most waiting workloads of a large cycle end pending and change nothing.
  QueueId q;
  uint64_t picked_at = 0;
  while (true) {
    if (sorter.MovesWithHeads() || !q.valid() || !turns_.active(q) ||
        picked_at != queues_.changes()) {
      q = turns_.Pick(sorter);
      picked_at = queues_.changes();
    }
    if (!q.valid()) break;
    const std::vector<WorkloadId>& list = lists[q.index()];
    size_t& c = turns_.cursor(q);
    const WorkloadId w = list[c++];
    // The queue's next workload is served within a few turns; start loading what TryAdmit reads
    // of it now, since waiting lists are in queue order, not in memory order. The Workload
    // itself is read only for work that starts or preempts.
    if (c + 2 * kPrefetchAhead < list.size()) work_.PrefetchAskIndex(list[c + 2 * kPrefetchAhead]);
    if (c + kPrefetchAhead < list.size()) work_.PrefetchAsk(list[c + kPrefetchAhead]);
    ++out_.stats.workloads_considered;
    const Outcome o = TryAdmit(w, pass);
    const bool strict = Strategy(q) == QueueingStrategy::kStrictFifo;
    if (o == Outcome::kDeferred) {
      (*deferred)[q.index()].push_back(w);
      if (strict) {  // nothing may pass it in this pass either
        while (c < list.size()) (*deferred)[q.index()].push_back(list[c++]);
      }
    } else if (o == Outcome::kPending && strict && c < list.size() && !explain_) {
      pending_count_ += static_cast<int32_t>(list.size() - c);
      c = list.size();
    } else if (o == Outcome::kPending && strict && c < list.size()) {
      const auto blocked = std::make_shared<const PendingExplanation>(
          PendingExplanation{"queue " + tree_.queue(q).name + " is strict FIFO and " + wl(w).name +
                                 " ahead of it cannot start",
                             {}});
      while (c < list.size()) Pend(list[c++], PendingReason::kBlockedByQueueHead, blocked);
    }
    if (c >= list.size()) turns_.Finish(q);
  }
}

Cycle::Outcome Cycle::TryAdmit(WorkloadId w, int pass) {
  const Workload& work = wl(w);  // read only where a workload may start or preempt
  const QueueId q = work_.queue_of(w);
  const Ask& ask = work_.ask(w);
  const int32_t total = ask.total;
  const int32_t minimum = ask.minimum;
  const bool reserved = ask.reserved();
  // The sizes still possible: all pods, then the gang's minimum. Inline, not a vector: this runs
  // for every waiting workload in each pass.
  SmallSizes sizes;
  sizes.push_back(total);
  if (minimum < total) sizes.push_back(minimum);

  auto keep = [&](auto pred, std::string* why) {
    size_t kept = 0;  // compacted in place: sizes[kept] is never past the element being read
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int32_t n = sizes[i];
      std::string problem = pred(n);
      if (problem.empty()) {
        sizes[kept++] = n;
      } else if (why->empty() || n == sizes.back()) {
        *why = std::move(problem);
      }
    }
    sizes.resize(kept);
    return !sizes.empty();
  };

  std::string why;
  // At its limit, a workload may still preempt lower-priority work of its own queue, the limit
  // counted after those victims leave (docs/fairness.md, promise 2): then it goes on to the
  // victim search with its own queue's candidates only.
  std::string limit_why;
  const bool at_limit =
      !keep([&](int32_t n) { return admission_.Limit(q, work_.RequestOf(w, n)); }, &limit_why);
  if (at_limit) {
    if (!planner_.MayPreemptWithin(w) || !planner_.DelayPassed(w)) {
      Pend(w, PendingReason::kOverQueueLimit, limit_why);
      return Outcome::kPending;
    }
    sizes.push_back(total);
    if (minimum < total) sizes.push_back(minimum);
  }
  if (reserved &&
      !keep([&](int32_t n) { return admission_.ReservedQuota(q, work_.RequestOf(w, n)); }, &why)) {
    Pend(w, PendingReason::kOverQuota, "reserved work runs only within quota: " + why);
    return Outcome::kPending;
  }
  if (pass == 1 && !reserved) {
    std::string unused;
    if (!keep(
            [&](int32_t n) {
              return queues_.OverFairShare(q, work_.RequestOf(w, n))
                         ? std::string("over fair share")
                         : std::string();
            },
            &unused))
      return Outcome::kDeferred;
  }
  if (!keep([&](int32_t n) { return admission_.Lending(q, work_.RequestOf(w, n), reserved); },
            &why)) {
    Pend(w, PendingReason::kLendingLimit, why);
    return Outcome::kPending;
  }

  // On free capacity.
  for (int32_t n : at_limit ? std::span<const int32_t>() : std::span<const int32_t>(sizes)) {
    const int32_t shape = work_.ShapeOf(w, n);
    if (no_fit_[shape]) {
      ++out_.stats.placement_cache_hits;
      continue;
    }
    ++out_.stats.placement_attempts;
    if (auto plan = pol_.placement->Place(state_, feas_, work, n, nullptr)) {
      Commit(w, std::move(*plan), !reserved && queues_.Borrowing(q, work_.RequestOf(w, n)));
      return Outcome::kAdmitted;
    }
    no_fit_[shape] = 1;
    touched_shapes_.push_back(shape);
  }

  // By preemption: priority within the queue, and in the deserved pass reclaim from queues that
  // borrow (by quota, or by fair share).
  PreemptionPlanner::Search search =
      planner_.Gather(w, pass, at_limit, work_.RequestOf(w, sizes.back()));
  const bool any_candidate = search.any_candidate;

  // On capacity that earlier preemptions are releasing; only work entitled to preempt waits
  // for it, borrowers do not. Work that may preempt waits rather than evict more.
  if ((pass == 1 || any_candidate) && !at_limit && !releasing_.empty()) {
    for (int32_t n : sizes) {
      if (auto plan = pol_.placement->Place(state_, feas_, work, n, &releasing_)) {
        HoldFor(w, std::move(*plan));
        Pend(w, PendingReason::kWaitingForPreemption,
             "waiting for capacity that preempted workloads are releasing");
        return Outcome::kPending;
      }
    }
  }

  if (std::optional<PreemptionPlanner::Preemption> p =
          planner_.Plan(w, pass, at_limit, search, sizes, releasing_, out_.stats)) {
    PreemptFor(w, p->pods, p->victims, std::move(p->plan));
    return Outcome::kPending;
  }

  if (at_limit) {
    Pend(w, PendingReason::kOverQueueLimit,
         limit_why + "; no lower-priority work of queue " + work.queue + " can make room under it");
    return Outcome::kPending;
  }
  if (!explain_) {
    Pend(w, PendingReason::kNoNodeFits, std::shared_ptr<const PendingExplanation>());
    return Outcome::kPending;
  }
  Pend(w, PendingReason::kNoNodeFits, explainer_.NoFit(w, sizes.back()));
  // Only a real shortage of capacity is NoNodeFits (promise 9): work within its quota at every
  // level, whom the cluster owes room, or work that would not fit even were the elastic running
  // work gone. Which others wait for a rule is settled once the cycle has decided the rest.
  if (!queues_.Guaranteed(q, work_.RequestOf(w, sizes.back())))
    explainer_.SettleLater(out_.pending.size() - 1, w, sizes.back(), pass);
  return Outcome::kPending;
}

void Cycle::PreemptFor(WorkloadId w, int32_t pods, const std::vector<VictimCandidate>& victims,
                       PlacementPlan plan) {
  const Workload& work = wl(w);
  const QueueId q = work_.queue_of(w);
  std::vector<std::string> details;
  for (const VictimCandidate& v : victims) {
    const bool by_reclaim = v.reason == PreemptReason::kReclaim;
    const QueueId mine = by_reclaim ? tree_.Sides(q, QueueId{v.queue}).first : QueueId{};
    Preempt(v.workload, v.reason, w,
            by_reclaim
                ? "reclaimed for " + work.name + ": queue " + work.queue + " is below its " +
                      (queues_.WithinQuota(mine, work_.RequestOf(w, pods)) ? "quota" : "fair share")
                : "preempted by " + work.name + " (priority " + std::to_string(work.priority) +
                      " over " + std::to_string(wl(v.workload).priority) + ")");
    details.push_back("victim " + wl(v.workload).name + " (" +
                      std::string(PreemptReasonName(v.reason)) + ")");
  }
  Pend(w, PendingReason::kWaitingForPreemption,
       "preempting " + std::to_string(victims.size()) + " workload" +
           (victims.size() == 1 ? "" : "s") + " to make room",
       std::move(details));
  // The room it preempts for is its queue's from now on in this cycle, as its victims' is no
  // longer theirs: later decisions see both sides as the preemption leaves them.
  queues_.Nominate(q, work_.RequestOf(w, pods), work.reserved());
  HoldFor(w, std::move(plan));
}

void Cycle::HoldFor(WorkloadId w, PlacementPlan plan) {
  const Workload& work = wl(w);
  for (const PodAssignment& a : plan.pods) {
    const PodSet& ps = work.pod_sets[a.pod_set];
    const Resources& req = ps.request;
    // What is not free now comes from capacity on its way back: its victims', or what other
    // leaving work releases, which no one else counts on then.
    NodeCapacity rest = NodeCapacity::OfPod(a.placement.gpu_mask, req, ps.mig);
    rest.Remove(state_.Hold(a.placement, req, ps.gpu_memory_mib, ps.mig));
    // A share now stays on its GPU: the GPU is not coming back whole.
    if (req.gpu_share()) rest.gpu_mask = a.placement.gpu_mask;
    if (!releasing_.empty()) releasing_.Take(a.placement.node.value, rest);
  }
  out_.nominations.push_back({w, std::move(plan.pods)});
}

void Cycle::Commit(WorkloadId w, PlacementPlan plan, bool borrowing) {
  const Workload& work = wl(w);
  Resources total;
  for (const PodAssignment& a : plan.pods) {
    const PodSet& ps = work.pod_sets[a.pod_set];
    const Resources& req = ps.request;
    state_.Claim(a.placement, req, ps.gpu_memory_mib, ps.mig);
    // A share bound beside leaving shares keeps their GPU from coming back whole.
    if (req.gpu_share() && !releasing_.empty())
      releasing_.Take(a.placement.node.value, NodeCapacity{a.placement.gpu_mask, 0, 0, 0});
    total += ps.Charge();
  }
  queues_.AddRunning(work_.queue_of(w), total, work.reserved());
  if (work.state == WorkloadState::kSuspended) {
    out_.resumes.push_back({w, std::move(plan.pods), borrowing});
  } else {
    out_.binds.push_back({w, std::move(plan.pods), borrowing});
  }
}

void Cycle::Preempt(WorkloadId v, PreemptReason reason, WorkloadId preemptor, std::string message) {
  const Workload& work = wl(v);
  planner_.MarkVictim(v);
  Resources total;
  for (size_t i = 0; i < work.placements.size(); ++i) {
    const PodSet* ps = work.PlacementPodSet(i);
    state_.MarkReleasing(work.placements[i], ps != nullptr ? ps->request : Resources{},
                         ps != nullptr ? ps->mig : MigAsk{});
    // Room freed by a policy preemption belongs to its preemptor; a failed GPU's workload
    // frees room for whoever comes first.
    if (reason == PreemptReason::kHardwareFault) releasing_.AddPod(state_, work, i);
    if (ps != nullptr) total += ps->Charge();
  }
  // A workload on its way out no longer counts against its queue.
  const QueueId q = work_.queue_of(v);
  if (q.valid()) {
    queues_.RemoveRunning(q, total, work.reserved());
  }
  out_.preemptions.push_back(
      {v, reason, preemptor,
       work.checkpoint_grace_seconds.value_or(cfg_.default_checkpoint_grace_seconds),
       GpuHoursLost(work, s_.now), std::move(message)});
}

void Cycle::Pend(WorkloadId w, PendingReason reason, std::string message,
                 std::vector<std::string> details) {
  if (!explain_) {
    ++pending_count_;
    return;
  }
  Pend(w, reason,
       std::make_shared<const PendingExplanation>(
           PendingExplanation{std::move(message), std::move(details)}));
}

void Cycle::Pend(WorkloadId w, PendingReason reason,
                 std::shared_ptr<const PendingExplanation> explanation) {
  ++pending_count_;
  if (explain_) out_.pending.push_back({w, reason, std::move(explanation), 0});
}

void Cycle::BeginRun() {
  out_ = {};
  pending_count_ = 0;
  for (size_t i = 0; i < s_.queues.size(); ++i) {
    const QueueId q{static_cast<int32_t>(i)};
    if (!tree_.valid(q)) out_.issues.push_back({"queue " + s_.queues[i].name, tree_.error(q)});
  }
  for (const SnapshotIssue& issue : state_.issues()) out_.issues.push_back(issue);
  for (const auto& [w, issues] : work_.issues())
    out_.issues.insert(out_.issues.end(), issues.begin(), issues.end());

  // Per workload and per shape: the loads since the last cycle may have added some.
  planner_.BeginCycle();
  no_fit_.resize(work_.num_shapes(), 0);
  explainer_.BeginCycle();
  queues_.BeginCycle(/*journal=*/keep_);
  if (keep_) state_.BeginJournal();
  work_.RecountLowestPriority();
  // Capacity being released, in workload order: by work in its grace period, and by running
  // work on a failed GPU, which every cycle preempts until the caller stops it.
  const std::vector<WorkloadId>& releasing_ids = work_.releasing();
  const std::vector<WorkloadId>& faulted_ids = work_.faulted();
  auto releasing = releasing_ids.begin();
  auto faulted = faulted_ids.begin();
  while (releasing != releasing_ids.end() || faulted != faulted_ids.end()) {
    if (faulted == faulted_ids.end() ||
        (releasing != releasing_ids.end() && *releasing < *faulted)) {
      const Workload& w = wl(*releasing++);
      for (size_t p = 0; p < w.placements.size(); ++p) releasing_.AddPod(state_, w, p);
    } else {
      Preempt(*faulted++, PreemptReason::kHardwareFault, WorkloadId{},
              "holds a GPU that failed its health checks");
    }
  }
  for (const auto& [w, why] : work_.invalid()) Pend(WorkloadId{w}, why.first, why.second);
}

// A kept cycle puts back what it changed; the next starts from the loaded state.
void Cycle::EndRun() {
  if (!keep_) return;
  planner_.EndCycle(out_.preemptions);
  state_.RollBack();
  queues_.RollBack();
  releasing_ = CapacityOverlay();
  for (int32_t shape : touched_shapes_) {
    no_fit_[shape] = 0;
  }
  touched_shapes_.clear();
  explainer_.EndCycle();
}

CycleResult Cycle::Run(const CycleOptions& options) {
  explain_ = options.explain;
  feas_.ForgetShareScores();  // a kept cycle scores shares under this snapshot's mix
  BeginRun();
  ComputeFairShare();
  work_.SortWaiting(keep_);

  std::vector<std::vector<WorkloadId>> deferred(s_.queues.size());
  std::visit(
      [&](const auto& sorter) {
        Serve(sorter, work_.waiting(), 1, &deferred);
        Serve(sorter, deferred, 2, nullptr);
      },
      sorter_);

  if (explain_) {
    explainer_.Finish(&out_);
  }
  out_.stats.pending = pending_count_;
  EndRun();
  return std::move(out_);
}

}  // namespace chamber::core
