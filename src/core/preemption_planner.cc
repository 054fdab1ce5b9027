#include "core/preemption_planner.h"

#include <algorithm>
#include <bit>
#include <tuple>

namespace chamber::core {
namespace {
constexpr double kEpsilon = 1e-9;
double Hours(Duration d) { return static_cast<double>(d.count()) / 3.6e6; }
}  // namespace

PreemptionPlanner::PreemptionPlanner(const Snapshot& s, const EngineConfig& cfg,
                                     const Policies& pol, const EngineTuning& tune,
                                     const QueueTree& tree, const ClusterState& state,
                                     const FeasibilityCache& feasibility,
                                     const QueueAccounting& queues, const LoadedWork& work,
                                     const AnySorter& sorter)
    : s_(s),
      cfg_(cfg),
      pol_(pol),
      tune_(tune),
      tree_(tree),
      state_(state),
      feas_(feasibility),
      queues_(queues),
      work_(work),
      sorter_(sorter),
      running_(s.queues.size()) {}

PreemptionPlanner::~PreemptionPlanner() = default;

void PreemptionPlanner::BeginCycle() {
  // Loads since the last cycle may have added workloads; marks are clear between cycles.
  victim_.resize(s_.workloads.size(), 0);
}

void PreemptionPlanner::EndCycle(std::span<const PreemptDecision> preemptions) {
  // Only this cycle's victims are marked: clearing them, not the whole table, keeps a cycle's
  // cost to what it decided.
  for (const PreemptDecision& p : preemptions) victim_[p.workload.index()] = 0;
  no_victims_.clear();
  index_.reset();
  one_pod_searches_ = 0;
  if (running_loaded_) {
    for (std::vector<Running>& r : running_) r.clear();
    running_placements_.clear();
    running_loaded_ = false;
  }
}

void PreemptionPlanner::MarkVictim(WorkloadId v) {
  victim_[v.index()] = 1;
  if (index_) index_->Remove(v);
}

void PreemptionPlanner::LoadRunning() {
  if (running_loaded_) return;
  running_loaded_ = true;
  for (WorkloadId id : work_.running()) {
    const Workload& w = wl(id);
    running_[work_.queue_of(id).index()].push_back(
        {id, w.priority, Shielded(w), GpuHoursLost(w, s_.now),
         static_cast<uint32_t>(running_placements_.size()),
         static_cast<uint32_t>(w.placements.size()), work_.held(id), w.submit_time});
    running_placements_.insert(running_placements_.end(), w.placements.begin(), w.placements.end());
  }
}

// Read once per running workload (Running::shielded); Candidates adds victim_ on top. Anything
// here that changes during a cycle must be checked in Candidates instead.
bool PreemptionPlanner::Shielded(const Workload& w) const {
  if (w.reserved()) return true;
  if (s_.now - w.start_time < cfg_.min_runtime) return true;
  int32_t recent = 0;
  for (Time t : w.recent_preemptions)
    if (s_.now - t < cfg_.preemption_window) ++recent;
  return recent >= cfg_.max_preemptions_per_window;
}

double GpuHoursLost(const Workload& w, Time now) {
  Time since = w.start_time;
  if (w.last_checkpoint_time && *w.last_checkpoint_time > since) since = *w.last_checkpoint_time;
  if (now <= since) return 0;
  int64_t milli = 0;
  for (size_t i = 0; i < w.placements.size(); ++i)
    milli += HeldGpuMilli(w.placements[i], w.PlacementPodSet(i));
  return GpusOf(milli) * Hours(now - since);
}

bool PreemptionPlanner::MayPreemptWithin(WorkloadId w) const {
  const QueueId q = work_.queue_of(w);
  const WithinQueuePreemption policy = tree_.queue(q).preemption.within_queue;
  if (!cfg_.priority_preemption_enabled || policy == WithinQueuePreemption::kNever) return false;
  // running_ never gains entries during a cycle, so its lowest priority bounds every victim's.
  const int32_t least = work_.lowest_running_priority(q);
  return policy == WithinQueuePreemption::kLowerOrNewerEqualPriority
             ? work_.ask(w).priority >= least
             : work_.ask(w).priority > least;
}

bool PreemptionPlanner::DelayPassed(WorkloadId w) const {
  // The workload itself is read only where its queue has a delay: waiting work's records are
  // kept apart from it so that a cycle rarely touches it.
  const Duration delay = tree_.queue(work_.queue_of(w)).preemption.delay;
  return delay.count() <= 0 || s_.now - wl(w).submit_time >= delay;
}

void PreemptionPlanner::PriorityCandidates(WorkloadId w, std::vector<VictimCandidate>* out) {
  if (!MayPreemptWithin(w)) return;
  const int32_t priority = work_.ask(w).priority;
  const QueueId q = work_.queue_of(w);
  const bool newer_equal =
      tree_.queue(q).preemption.within_queue == WithinQueuePreemption::kLowerOrNewerEqualPriority;
  const Time submitted = wl(w).submit_time;
  LoadRunning();
  for (const Running& v : running_[q.index()]) {
    if (v.shielded || victim_[v.id.index()]) continue;
    if (v.priority > priority) continue;
    if (v.priority == priority && !(newer_equal && v.submit_time > submitted)) continue;
    out->push_back(CandidateOf(v, PreemptReason::kPriority, 0));
  }
}

bool PreemptionPlanner::BorrowingPreempts(QueueId q) const {
  return !cfg_.fair_share_reclaim_enabled &&
         tree_.queue(q).preemption.while_borrowing == WhileBorrowingPreemption::kLowerPriority;
}

bool PreemptionPlanner::MayTakeWhileBorrowing(QueueId q, int32_t preemptor, int32_t victim) const {
  const std::optional<int32_t>& most = tree_.queue(q).preemption.max_priority_threshold;
  return victim < preemptor && (!most || victim <= *most);
}

PreemptionPlanner::ReclaimPath PreemptionPlanner::ReclaimFrom(QueueId q, QueueId other,
                                                              const Resources& req,
                                                              int pass) const {
  if (other == q || !tree_.leaf(other) || work_.running_in(other) == 0) return ReclaimPath::kNone;
  const auto [mine, theirs] = tree_.Sides(q, other);
  if (!mine.valid() || queues_.FirstNotBorrowing(other, theirs, req).valid())
    return ReclaimPath::kNone;
  // Beyond its fair share (pass 2) only the while-borrowing policy reclaims.
  if (pass == 1 && queues_.WithinQuota(mine, req)) return ReclaimPath::kQuota;
  if (pass == 1 && cfg_.fair_share_reclaim_enabled &&
      queues_.ShareRatio(mine, req) <= queues_.ShareRatio(theirs, {}))
    return ReclaimPath::kFairShare;
  if (BorrowingPreempts(q)) return ReclaimPath::kWhileBorrowing;
  return ReclaimPath::kNone;
}

// The promises a victim set keeps (docs/fairness.md): reclaim leaves every queue it takes from at
// or above its effective quota up to its side (1), and is by quota (4) or by fair share without
// the two sides trading places (5); the preemptor's queue and its ancestors end within their
// limits once the victims leave (2). Victims are summed up the tree in a small scratch list:
// sets hold a few workloads.
class PreemptionPlanner::Rules final : public VictimRules {
 public:
  // Uses the planner's scratch tables: one Rules at a time. `priority` is the preemptor's.
  Rules(PreemptionPlanner& p, QueueId q, const Resources& req, int32_t priority, int pass)
      : c_(p),
        q_(q),
        req_(req),
        priority_(priority),
        pass_(pass),
        taken_(p.rules_taken_),
        sides_(p.rules_sides_) {
    taken_.assign(p.s_.queues.size(), {});
    sides_.assign(p.s_.queues.size(), {});
  }

  enum class Refusal { kNone, kQuota, kFairShare };

  bool Allows(std::span<const VictimCandidate> victims) const override {
    Sum(victims);
    for (const Reclaimed& r : reclaimed_)
      if (r.count > 0 && Check(r.leaf) != Refusal::kNone) return false;
    return true;
  }

  // Which rule, if any, refuses taking `v` alone.
  Refusal Why(const VictimCandidate& v) const {
    Sum(std::span(&v, 1));
    return Check(QueueId{v.queue});
  }

  bool Enough(std::span<const VictimCandidate> victims) const override {
    Sum(victims);
    for (QueueId a = q_; a.valid(); a = c_.tree_.parent(a)) {
      for (Resource r : kAllResources) {
        const int64_t limit = c_.tree_.queue(a).res(r).limit;
        if (limit == kUnlimited || req_[r] == 0) continue;
        if (c_.queues_.usage(a)[r] + req_[r] - taken_[a.index()][r] > limit) return false;
      }
    }
    return true;
  }

 private:
  // What the set holds per queue, summed up the tree. Searches ask about sets that grow and
  // shrink at the end (a greedy search adds candidates one by one and drops those refused), so
  // only what differs from the last set asked about is added or taken away.
  // The rules for what the summed set takes from one leaf queue.
  Refusal Check(QueueId leaf) const {
    const auto [mine, theirs] = SidesWith(leaf);
    if (!mine.valid()) return Refusal::kQuota;
    for (QueueId b = leaf;; b = c_.tree_.parent(b)) {
      const Resources after = c_.queues_.usage(b) - taken_[b.index()];
      for (Resource r : kAllResources)
        if (c_.tree_.managed(r) && req_[r] > 0 && after[r] < c_.tree_.effective_quota(b)[r])
          return Refusal::kQuota;
      if (b == theirs) break;
    }
    const Resources mine_delta = req_ - taken_[mine.index()];
    if (pass_ == 1 && c_.queues_.WithinQuota(mine, mine_delta)) return Refusal::kNone;
    if (c_.BorrowingPreempts(q_)) {
      const auto it = std::find_if(reclaimed_.begin(), reclaimed_.end(),
                                   [&](const Reclaimed& r) { return r.leaf == leaf; });
      return it != reclaimed_.end() && it->takeable == it->count ? Refusal::kNone : Refusal::kQuota;
    }
    if (pass_ != 1 || !c_.cfg_.fair_share_reclaim_enabled) return Refusal::kQuota;
    Resources theirs_delta;
    theirs_delta -= taken_[theirs.index()];
    if (c_.queues_.ShareRatio(mine, mine_delta) >
        c_.queues_.ShareRatio(theirs, theirs_delta) + kEpsilon)
      return Refusal::kFairShare;
    return Refusal::kNone;
  }

  void Sum(std::span<const VictimCandidate> victims) const {
    size_t same = 0;
    while (same < summed_.size() && same < victims.size() &&
           summed_[same].workload == victims[same].workload)
      ++same;
    while (summed_.size() > same) {
      Add(summed_.back(), -1);
      summed_.pop_back();
    }
    for (size_t i = same; i < victims.size(); ++i) {
      Add(victims[i], +1);
      summed_.push_back(victims[i]);
    }
  }
  void Add(const VictimCandidate& v, int sign) const {
    for (QueueId a{v.queue}; a.valid(); a = c_.tree_.parent(a)) {
      if (sign > 0) {
        taken_[a.index()] += v.held;
      } else {
        taken_[a.index()] -= v.held;
      }
    }
    if (v.reason != PreemptReason::kReclaim) return;
    auto it = std::find_if(reclaimed_.begin(), reclaimed_.end(),
                           [&](const Reclaimed& r) { return r.leaf.value == v.queue; });
    if (it == reclaimed_.end()) it = reclaimed_.insert(reclaimed_.end(), {QueueId{v.queue}, 0, 0});
    it->count += sign;
    if (c_.MayTakeWhileBorrowing(q_, priority_, v.priority)) it->takeable += sign;
  }
  std::pair<QueueId, QueueId> SidesWith(QueueId other) const {
    auto& [known, sides] = sides_[other.index()];
    if (!known) {
      known = true;
      sides = c_.tree_.Sides(q_, other);
    }
    return sides;
  }

  // Per leaf with reclaim victims: how many, and how many the while-borrowing policy may take.
  struct Reclaimed {
    QueueId leaf;
    int32_t count = 0;
    int32_t takeable = 0;
  };

  const PreemptionPlanner& c_;
  QueueId q_;
  Resources req_;
  int32_t priority_;
  int pass_;
  mutable std::vector<VictimCandidate> summed_;  // the set Sum last saw
  std::vector<Resources>& taken_;                // per queue
  mutable std::vector<Reclaimed> reclaimed_;
  std::vector<std::pair<bool, std::pair<QueueId, QueueId>>>& sides_;  // per queue, once known
};

std::vector<VictimCandidate> PreemptionPlanner::Candidates(WorkloadId w, bool reclaim,
                                                           const Resources& req, int pass) {
  std::vector<VictimCandidate> out;
  PriorityCandidates(w, &out);
  if (reclaim && cfg_.reclaim_enabled) {
    const QueueId q = work_.queue_of(w);
    // Borrowing queues first, so the result is allocated once: it can hold tens of thousands.
    std::vector<QueueId> borrowers;
    size_t most = out.size();
    std::vector<uint8_t> while_borrowing;
    for (QueueId other : tree_.top_down()) {
      const ReclaimPath path = ReclaimFrom(q, other, req, pass);
      if (path == ReclaimPath::kNone) continue;
      while_borrowing.push_back(path == ReclaimPath::kWhileBorrowing);
      borrowers.push_back(other);
      most += work_.running_in(other);
    }
    if (!borrowers.empty()) LoadRunning();
    out.reserve(most);
    const bool lower_only = tree_.queue(q).preemption.reclaim == ReclaimPreemption::kLowerPriority;
    const int32_t priority = work_.ask(w).priority;
    for (size_t b = 0; b < borrowers.size(); ++b) {
      const QueueId other = borrowers[b];
      const double over = Standing(other);
      for (const Running& v : running_[other.index()]) {
        if (v.shielded || victim_[v.id.index()] || (lower_only && v.priority >= priority) ||
            (while_borrowing[b] && !MayTakeWhileBorrowing(q, priority, v.priority)))
          continue;
        out.push_back(CandidateOf(v, PreemptReason::kReclaim, over));
      }
    }
  }
  return out;
}

void PreemptionPlanner::BuildVictimIndex() {
  // Every running workload reclaim could take this cycle: later victims leave it as they go.
  LoadRunning();
  std::vector<VictimIndex::Entry> entries;
  for (size_t q = 0; q < running_.size(); ++q) {
    for (const Running& v : running_[q]) {
      if (v.shielded || victim_[v.id.index()]) continue;
      entries.push_back({CandidateOf(v, PreemptReason::kReclaim, 0), static_cast<int32_t>(q)});
    }
  }
  index_ = std::make_unique<VictimIndex>(state_.num_nodes(), s_.queues.size(), s_.workloads.size(),
                                         std::move(entries));
  groups_.assign(s_.queues.size(), {});
}

bool PreemptionPlanner::MarkReclaimGroups(QueueId q, bool reclaim, const Resources& req, int pass) {
  bool any = false;
  for (size_t i = 0; i < groups_.size(); ++i) {
    const QueueId other{static_cast<int32_t>(i)};
    VictimGroup& g = groups_[i];
    g = {};
    if (!reclaim || !cfg_.reclaim_enabled || ReclaimFrom(q, other, req, pass) == ReclaimPath::kNone)
      continue;
    g.overshare = Standing(other);
    g.candidates = index_->alive(other.value) > 0;
    any |= g.candidates;
  }
  return any;
}

PreemptionPlanner::Search PreemptionPlanner::Gather(WorkloadId w, int pass, bool at_limit,
                                                    const Resources& first_request) {
  // Its queue's policy may forbid reclaim, or limit it to lower priorities (then the victim
  // index, which does not know priorities, is not used), or make it wait before preempting at
  // all.
  const QueueId q = work_.queue_of(w);
  const int32_t total = work_.ask(w).total;
  const QueuePreemption& policy = tree_.queue(q).preemption;
  Search search;
  const bool may_preempt = DelayPassed(w);
  search.reclaim = may_preempt && (pass == 1 || BorrowingPreempts(q)) && !at_limit &&
                   policy.reclaim != ReclaimPreemption::kNever;
  search.indexed = may_preempt && total == 1 && index_ &&
                   policy.reclaim == ReclaimPreemption::kAny && !BorrowingPreempts(q);
  if (!may_preempt) {
    // Waits out its queue's preemption delay.
  } else if (search.indexed) {
    PriorityCandidates(w, &search.candidates);
    search.any_candidate =
        MarkReclaimGroups(q, search.reclaim, first_request, pass) || !search.candidates.empty();
  } else {
    search.candidates = Candidates(w, search.reclaim, first_request, pass);
    search.any_candidate = !search.candidates.empty();
    // Reclaim candidates come last. Enough single-pod searches among them pay for the index.
    if (total == 1 && search.any_candidate &&
        search.candidates.back().reason == PreemptReason::kReclaim &&
        tune_.victim_index_after > 0 && ++one_pod_searches_ == tune_.victim_index_after)
      BuildVictimIndex();
  }
  return search;
}

// The first of its own lower-priority work (in victim preference order) that frees the limit
// alone, or else as few as the preference order needs once every unneeded one is spared again.
std::optional<PreemptionPlanner::Preemption> PreemptionPlanner::PlanAtLimit(
    WorkloadId w, int pass, const Search& search, std::span<const int32_t> sizes) {
  const Workload& work = wl(w);
  const QueueId q = work_.queue_of(w);
  for (int32_t n : sizes) {
    std::optional<PlacementPlan> plan = pol_.placement->Place(state_, feas_, work, n, nullptr);
    if (!plan) continue;
    const Rules rules(*this, q, work_.RequestOf(w, n), work_.ask(w).priority, pass);
    std::vector<VictimCandidate> by_preference = search.candidates;
    std::sort(by_preference.begin(), by_preference.end(), [](const auto& a, const auto& b) {
      return std::tuple(-a.queue_overshare, a.priority, a.gpu_hours_lost, a.workload) <
             std::tuple(-b.queue_overshare, b.priority, b.gpu_hours_lost, b.workload);
    });
    std::vector<VictimCandidate> set;
    for (const VictimCandidate& c : by_preference) {
      if (rules.Enough(std::span(&c, 1))) {
        set = {c};
        break;
      }
    }
    for (size_t i = 0; set.empty() && i < by_preference.size(); ++i) {
      std::vector<VictimCandidate> taken(by_preference.begin(), by_preference.begin() + i + 1);
      if (!rules.Enough(taken)) continue;
      for (size_t j = taken.size(); j-- > 0 && taken.size() > 1;) {
        std::vector<VictimCandidate> trial = taken;
        trial.erase(trial.begin() + static_cast<std::ptrdiff_t>(j));
        if (rules.Enough(trial)) taken = std::move(trial);
      }
      set = std::move(taken);
    }
    if (set.empty()) break;
    return Preemption{n, std::move(set), std::move(*plan)};
  }
  return std::nullopt;
}

std::optional<PreemptionPlanner::Preemption> PreemptionPlanner::Plan(
    WorkloadId w, int pass, bool at_limit, Search& search, std::span<const int32_t> sizes,
    const CapacityOverlay& releasing, CycleStats& stats) {
  if (!search.any_candidate) return std::nullopt;
  // At its limit with room already free, the victims need only free the limit.
  if (at_limit) {
    if (std::optional<Preemption> p = PlanAtLimit(w, pass, search, sizes)) return p;
  }
  const Workload& work = wl(w);
  const QueueId q = work_.queue_of(w);
  std::vector<VictimCandidate>& candidates = search.candidates;
  for (int32_t n : sizes) {
    const uint64_t key =
        uint64_t{static_cast<uint32_t>(q.value)} << 32 | static_cast<uint32_t>(work_.ShapeOf(w, n));
    if (!at_limit && no_victims_.contains(key)) continue;
    ++stats.preemption_searches;
    const Rules rules(*this, q, work_.RequestOf(w, n), work_.ask(w).priority, pass);
    std::optional<VictimSet> set;
    if (search.indexed) {
      ++stats.indexed_preemption_searches;
      set = pol_.victims->Select({.state = state_,
                                  .feasibility = feas_,
                                  .placement = *pol_.placement,
                                  .snapshot = s_,
                                  .preemptor = work,
                                  .pods = n,
                                  .candidates = std::move(candidates),
                                  .releasing = releasing,
                                  .rules = &rules,
                                  .index = index_.get(),
                                  .groups = groups_});
      // Where the index cannot settle it, the search is made again with every candidate.
      if (!set) candidates = Candidates(w, search.reclaim, work_.RequestOf(w, sizes.back()), pass);
    }
    // The last size tried takes the candidates rather than a copy: nothing reads them after it.
    if (!set)
      set = pol_.victims->Select(
          {.state = state_,
           .feasibility = feas_,
           .placement = *pol_.placement,
           .snapshot = s_,
           .preemptor = work,
           .pods = n,
           .candidates = n == sizes.back() ? std::move(candidates) : candidates,
           .releasing = releasing,
           .rules = &rules});
    if (!set) {
      if (!at_limit) no_victims_.insert(key);
      continue;
    }
    return Preemption{n, std::move(set->victims), std::move(set->plan)};
  }
  return std::nullopt;
}

PreemptionPlanner::Refusals PreemptionPlanner::CountRefusals(WorkloadId w, QueueId other,
                                                             QueueId theirs,
                                                             const Resources& request, int pass) {
  LoadRunning();
  const QueueId q = work_.queue_of(w);
  const int32_t priority = work_.ask(w).priority;
  const Rules rules(*this, q, request, priority, pass);
  const bool lower_only = tree_.queue(q).preemption.reclaim == ReclaimPreemption::kLowerPriority;
  Refusals out;
  for (const Running& v : running_[other.index()]) {
    if (v.shielded || victim_[v.id.index()] || (lower_only && v.priority >= priority)) continue;
    ++out.open;
    switch (rules.Why(CandidateOf(v, PreemptReason::kReclaim, 0))) {
      case Rules::Refusal::kQuota:
        ++out.by_quota;
        break;
      case Rules::Refusal::kFairShare: {
        ++out.by_share;
        Resources gone;
        gone -= v.held;
        out.lowest_after = std::min(out.lowest_after, queues_.ShareRatio(theirs, gone));
        break;
      }
      case Rules::Refusal::kNone:
        break;
    }
  }
  return out;
}

}  // namespace chamber::core
