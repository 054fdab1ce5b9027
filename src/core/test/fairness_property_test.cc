// The fairness promises of docs/fairness.md as properties of single cycles.
//
// Most promises are about one decision: which victims a preemptor may take, given the queues'
// usage when it is made. The generator here builds snapshots with exactly one waiting workload,
// so that the usage at its decision is the usage the snapshot shows (less the work on failed
// GPUs, which every cycle preempts first), over random queue trees (departments with a quota,
// departments that only group their teams, top-level teams), quotas, limits, weights, running
// work of every priority and one waiting workload that is a single pod or a gang. The checks
// recompute quotas, sides and share ratios from the snapshot with code of their own, and take
// fair shares from the cycle's queue statuses.
//
//   1. ReclaimNeverTakesAQueueBelowItsQuota: after a preemptor's victims leave, every queue it
//      reclaimed from holds at least its effective quota of what the preemptor asks for, from
//      the victim's leaf up to its side.
//   2. FairShareReclaimNeverFlips: a reclaim whose preemptor side does not stay within quota
//      leaves that side's share ratio no higher than the victim side's.
//   3. FairShareReclaimHappens: when one running workload of another queue could make room for a
//      single pod alone under both rules above, the cycle acts.
//   4. AQueueAtItsLimitPreemptsItsOwnLowerPriorityWork: likewise for a pod whose queue is at its
//      limit and one lower-priority workload of its own queue that frees both room and limit.
//   5. EveryVictimIsNeeded: no victim of a single-pod preemptor can be spared and still leave
//      room on some node that no earlier preemptor holds.
//   6. WhileBorrowingTakesOnlyLowerPriority: with fair-share reclaim off, work beyond its
//      quota reclaims only what its queue's whileBorrowing policy allows.
//   7. NoNodeFitsOnlyWhenCapacityIsShort and PolicyWaitsWouldFitWithoutElasticWork: a pod is
//      NoNodeFits only if it is within its quota at every level or no node would hold it with
//      all elastic running work gone, and FairShare or PreemptionNotAllowed only if it is beyond
//      its quota and some node would.
#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/engine.h"
#include "core/queue_tree.h"
#include "core/test/checks.h"
#include "core/test/generators.h"
#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using namespace ::chamber::core::testing;  // NOLINT(google-build-using-namespace)

constexpr double kSlack = 1e-9;

// --- The generator: one waiting workload. ---

// Three kinds, so that each promise is often in question: contested (the waiting workload's
// queue holds little, others fill the cluster, quotas often zero so that fair share decides),
// at its limit (its queue holds work and is capped at what it holds), and anything.
Snapshot GenFairnessSnapshot() {
  enum Kind { kContested, kAtLimit, kAny };
  const Kind kind = OneOf<Kind>({kContested, kContested, kAtLimit, kAny, kAny});
  SnapshotBuilder b;
  b.Now(kNow);
  const int nodes = Pick(1, 4);
  for (int i = 0; i < nodes; ++i) {
    auto n = b.Node("n" + std::to_string(i), OneOf<int>({4, 8, 8, 8}));
    if (Chance(10)) n.Unhealthy({0});
    if (Chance(10)) n.Cpu(Pick(4, 32) * 1000);
  }
  auto quota = [&] { return kind == kContested && Chance(60) ? 0 : Pick(0, 12); };
  std::vector<std::string> leaves;
  for (int d = Pick(0, 2); d > 0; --d) {
    const std::string dept = "dept" + std::to_string(d);
    auto q = b.Queue(dept);
    if (Chance(50)) q.Quota(Pick(0, 24));
    if (Chance(15)) q.Limit(q.get().res(Resource::kGpu).quota / kMilliPerGpu + Pick(0, 12));
    q.Weight(OneOf<double>({1, 1, 2, 0.5}));
    for (int t = Pick(1, 3); t > 0; --t) {
      const std::string team = dept + "-team" + std::to_string(t);
      auto tq = b.Queue(team, dept);
      tq.Quota(quota()).Weight(OneOf<double>({1, 1, 2, 0.5}));
      if (Chance(15)) tq.Limit(tq.get().res(Resource::kGpu).quota / kMilliPerGpu + Pick(0, 8));
      leaves.push_back(team);
    }
  }
  for (int t = Pick(leaves.empty() ? 2 : 0, 3); t > 0; --t) {
    const std::string team = "team" + std::to_string(t);
    auto q = b.Queue(team);
    q.Quota(quota()).Weight(OneOf<double>({1, 1, 2, 0.5}));
    if (Chance(15)) q.Limit(q.get().res(Resource::kGpu).quota / kMilliPerGpu + Pick(0, 8));
    if (Chance(10)) q.Res(Resource::kCpu, Pick(0, 32) * 1000);
    leaves.push_back(team);
  }
  const std::string queue =
      leaves[static_cast<size_t>(Pick(0, static_cast<int>(leaves.size()) - 1))];
  std::vector<std::string> holders = leaves;
  for (int i = Pick(0, 6); i > 0; --i)
    holders.push_back(leaves[static_cast<size_t>(Pick(0, static_cast<int>(leaves.size()) - 1))]);
  if (kind == kContested && leaves.size() > 1)
    std::erase_if(holders, [&](const std::string& h) { return h == queue && Chance(80); });
  if (kind == kAtLimit) holders.insert(holders.end(), 3, queue);
  std::vector<NodeRoom> room = InitialRoom(b.snapshot());
  GenRunning(b, room, kind == kContested ? 8 : 4, 24, &holders);
  if (kind == kAtLimit) {  // capped at what it holds
    const QueueTree tree(b.snapshot().queues);
    int64_t used = 0;
    for (const Workload& w : b.snapshot().workloads)
      if (w.state == WorkloadState::kRunning && w.queue == queue)
        used += w.RequestOfFirst(static_cast<int32_t>(w.placements.size())).gpu_milli();
    Queue& q = b.snapshot().queues[tree.Find(queue).index()];
    q.res(Resource::kGpu).quota = std::min<int64_t>(q.res(Resource::kGpu).quota, used);
    q.res(Resource::kGpu).limit = used;
  }
  auto w = b.Workload("want", queue);
  w.Priority(kind == kAtLimit ? OneOf<int32_t>({50, 99, 100})
                              : OneOf<int32_t>({0, 10, 50, 50, 99, 100}))
      .Submit(Sec(Pick(0, 3600)));
  if (Chance(70)) {
    w.Pods(1, OneOf<int64_t>({1, 1, 2, 4, 8}));
  } else {
    w.Pods(Pick(2, 4), OneOf<int64_t>({1, 2, 4}));
    if (Chance(30)) w.MinMember(Pick(1, w.get().TotalPods()));
  }
  if (Chance(15)) w.Cpu(Pick(1, 8) * 500);
  if (Chance(15)) w.Suspended();
  return b.snapshot();
}

// --- The snapshot as the single decision sees it, computed independently of the engine. ---

struct View {
  explicit View(const Snapshot& snap, const CycleResult& res) : s(snap), r(res), tree(snap.queues) {
    const size_t nq = s.queues.size();
    usage.assign(nq, {});
    reserved.assign(nq, {});
    share.assign(nq, {});
    faulted = HardwareFaulted(r);
    for (size_t i = 0; i < s.workloads.size(); ++i) {
      const Workload& w = s.workloads[i];
      const QueueId q = tree.Find(w.queue);
      if (w.state != WorkloadState::kRunning || !q.valid() ||
          faulted.contains(static_cast<int32_t>(i)))
        continue;
      for (QueueId a = q; a.valid(); a = tree.parent(a)) {
        usage[a.index()] += Held(w);
        if (w.reserved()) reserved[a.index()] += Held(w);
      }
    }
    for (const QueueStatus& st : r.queues) share[st.queue.index()] = st.fair_share;
  }

  static Resources Held(const Workload& w) {
    return w.RequestOfFirst(static_cast<int32_t>(w.placements.size()));
  }

  int64_t EffectiveQuota(QueueId q, Resource res) const {
    return ::chamber::core::testing::EffectiveQuota(tree, q, res);
  }

  std::vector<QueueId> PathUp(QueueId q) const {
    std::vector<QueueId> out;
    for (; q.valid(); q = tree.parent(q)) out.push_back(q);
    return out;
  }

  // The ancestors of a and b just below where they meet.
  std::pair<QueueId, QueueId> Sides(QueueId a, QueueId b) const {
    const std::vector<QueueId> up_a = PathUp(a), up_b = PathUp(b);
    for (size_t i = 0; i < up_a.size(); ++i) {
      for (size_t j = 0; j < up_b.size(); ++j) {
        if (up_a[i] != up_b[j]) continue;
        if (i == 0 || j == 0) return {};
        return {up_a[i - 1], up_b[j - 1]};
      }
    }
    return {up_a.back(), up_b.back()};  // two roots
  }

  double Ratio(QueueId q, const Resources& delta) const {
    double ratio = 0;
    for (Resource res : kAllResources) {
      if (!tree.managed(res)) continue;
      const double used = static_cast<double>(usage[q.index()][res] + delta[res]);
      const double sh = share[q.index()][static_cast<int>(res)];
      if (sh > 1e-9) {
        ratio = std::max(ratio, used / sh);
      } else if (used > 0) {
        ratio = std::max(ratio, 1e9);
      }
    }
    return ratio;
  }

  bool WithinQuota(QueueId q, const Resources& delta) const {
    for (Resource res : kAllResources)
      if (tree.managed(res) && delta[res] > 0 &&
          usage[q.index()][res] + delta[res] > EffectiveQuota(q, res))
        return false;
    return true;
  }

  // What a set of workloads holds within q's subtree.
  Resources Within(QueueId q, const std::vector<WorkloadId>& set) const {
    Resources out;
    for (WorkloadId v : set) {
      const Workload& w = s.workloads[v.index()];
      for (QueueId a = tree.Find(w.queue); a.valid(); a = tree.parent(a))
        if (a == q) out += Held(w);
    }
    return out;
  }

  bool Protected(const Workload& v) const {
    const EngineConfig cfg;
    if (v.reserved() || s.now - v.start_time < cfg.min_runtime) return true;
    int32_t recent = 0;
    for (Time t : v.recent_preemptions)
      if (s.now - t < cfg.preemption_window) ++recent;
    return recent >= cfg.max_preemptions_per_window;
  }

  const Snapshot& s;
  const CycleResult& r;
  QueueTree tree;
  std::vector<Resources> usage, reserved;
  std::vector<ShareVector> share;
  std::set<int32_t> faulted;
};

// Each preemptor's policy victims (Reclaim and Priority), by preemptor.
std::map<int32_t, std::vector<WorkloadId>> VictimsByPreemptor(const CycleResult& r) {
  std::map<int32_t, std::vector<WorkloadId>> out;
  for (const PreemptDecision& p : r.preemptions)
    if (p.reason != PreemptReason::kHardwareFault) out[p.preemptor.value].push_back(p.workload);
  return out;
}

// The requests a preemptor may have been searched with: all its pods, or its gang's minimum.
std::vector<Resources> Requests(const Workload& w) {
  std::vector<Resources> out = {w.TotalRequest()};
  if (w.min_member > 0 && w.min_member < w.TotalPods())
    out.push_back(w.RequestOfFirst(w.min_member));
  return out;
}

// Promise 1 for one preemptor, request and victim set; empty when kept.
std::string QuotaFloorBroken(const View& v, QueueId p, const Resources& req,
                             const std::vector<WorkloadId>& victims,
                             const std::vector<PreemptReason>& reasons) {
  for (size_t i = 0; i < victims.size(); ++i) {
    if (reasons[i] != PreemptReason::kReclaim) continue;
    const QueueId other = v.tree.Find(v.s.workloads[victims[i].index()].queue);
    const auto [mine, theirs] = v.Sides(p, other);
    if (!mine.valid()) return "reclaim between a queue and its ancestor";
    for (QueueId b = other;; b = v.tree.parent(b)) {
      const Resources after = v.usage[b.index()] - v.Within(b, victims);
      for (Resource res : kAllResources) {
        if (!v.tree.managed(res) || req[res] == 0) continue;
        if (after[res] < v.EffectiveQuota(b, res))
          return "queue " + v.tree.queue(b).name + " left with " + FormatQuantity(res, after[res]) +
                 ", quota " + FormatQuantity(res, v.EffectiveQuota(b, res));
      }
      if (b == theirs) break;
    }
  }
  return {};
}

// Promise 5 for one preemptor, request and victim set; empty when kept.
std::string FlipAllowed(const View& v, QueueId p, const Resources& req,
                        const std::vector<WorkloadId>& victims,
                        const std::vector<PreemptReason>& reasons) {
  for (size_t i = 0; i < victims.size(); ++i) {
    if (reasons[i] != PreemptReason::kReclaim) continue;
    const QueueId other = v.tree.Find(v.s.workloads[victims[i].index()].queue);
    const auto [mine, theirs] = v.Sides(p, other);
    if (!mine.valid()) return "reclaim between a queue and its ancestor";
    const Resources mine_delta = req - v.Within(mine, victims);
    if (v.WithinQuota(mine, mine_delta)) continue;
    Resources theirs_delta;
    theirs_delta -= v.Within(theirs, victims);
    const double after_mine = v.Ratio(mine, mine_delta);
    const double after_theirs = v.Ratio(theirs, theirs_delta);
    if (after_mine > after_theirs + kSlack)
      return "queue " + v.tree.queue(mine).name + " ends at " + std::to_string(after_mine) +
             " of its fair share, above queue " + v.tree.queue(theirs).name + "'s " +
             std::to_string(after_theirs);
  }
  return {};
}

using SetCheck = std::string (*)(const View&, QueueId, const Resources&,
                                 const std::vector<WorkloadId>&, const std::vector<PreemptReason>&);

// A set check must hold for one of the preemptor's possible requests.
std::string CheckEachPreemptor(const Snapshot& s, const CycleResult& r, SetCheck check) {
  const View v(s, r);
  for (const auto& [pre, victims] : VictimsByPreemptor(r)) {
    const Workload& w = s.workloads[static_cast<size_t>(pre)];
    std::vector<PreemptReason> reasons;
    for (WorkloadId id : victims)
      for (const PreemptDecision& d : r.preemptions)
        if (d.workload == id) reasons.push_back(d.reason);
    std::string error;
    for (const Resources& req : Requests(w)) {
      error = check(v, v.tree.Find(w.queue), req, victims, reasons);
      if (error.empty()) break;
    }
    if (!error.empty()) return w.name + ": " + error;
  }
  return {};
}

std::string CheckQuotaFloor(const Snapshot& s, const CycleResult& r) {
  return CheckEachPreemptor(s, r, QuotaFloorBroken);
}
std::string CheckNoFlip(const Snapshot& s, const CycleResult& r) {
  return CheckEachPreemptor(s, r, FlipAllowed);
}

int reclaims = 0;  // reclaim victims seen in the current case

std::string CountReclaims(const Snapshot&, const CycleResult& r) {
  for (const PreemptDecision& p : r.preemptions) reclaims += p.reason == PreemptReason::kReclaim;
  return {};
}

RC_GTEST_PROP(FairnessProperty, ReclaimNeverTakesAQueueBelowItsQuota, ()) {
  reclaims = 0;
  CheckCycles(GenFairnessSnapshot, {CheckQuotaFloor, CountReclaims});
  RC_TAG(reclaims > 0 ? "reclaims" : "no reclaim");
}

RC_GTEST_PROP(FairnessProperty, FairShareReclaimNeverFlips, ()) {
  reclaims = 0;
  CheckCycles(GenFairnessSnapshot, {CheckNoFlip, CountReclaims});
  RC_TAG(reclaims > 0 ? "reclaims" : "no reclaim");
}

// --- The while-borrowing policy (fair-share reclaim off): a preemptor whose side would be
// beyond its quota takes only work of lower priority, at most the threshold, and only where its
// queue's policy says so; the quota floor holds as ever.

RC_GTEST_PROP(FairnessProperty, WhileBorrowingTakesOnlyLowerPriority, ()) {
  EngineConfig cfg;
  cfg.fair_share_reclaim_enabled = false;
  const Engine engine(cfg);
  int borrowed = 0;
  for (int round = Pick(1, 12); round > 0; --round) {
    Snapshot s = GenFairnessSnapshot();
    const QueueTree tree(s.queues);
    Queue& waiter_queue = s.queues[tree.Find(s.workloads.back().queue).index()];
    QueuePreemption& policy = waiter_queue.preemption;
    if (Chance(70)) policy.while_borrowing = WhileBorrowingPreemption::kLowerPriority;
    if (Chance(50)) policy.max_priority_threshold = OneOf<int32_t>({0, 10, 50});
    const CycleResult r = engine.Schedule(s);
    const View v(s, r);
    for (const auto& [pre, victims] : VictimsByPreemptor(r)) {
      const Workload& w = s.workloads[static_cast<size_t>(pre)];
      const QueueId p = v.tree.Find(w.queue);
      std::vector<PreemptReason> reasons;
      for (WorkloadId id : victims)
        for (const PreemptDecision& d : r.preemptions)
          if (d.workload == id) reasons.push_back(d.reason);
      std::string error;
      for (const Resources& req : Requests(w)) {
        error = QuotaFloorBroken(v, p, req, victims, reasons);
        for (size_t i = 0; i < victims.size() && error.empty(); ++i) {
          if (reasons[i] != PreemptReason::kReclaim) continue;
          const Workload& victim = s.workloads[victims[i].index()];
          const QueueId mine = v.Sides(p, v.tree.Find(victim.queue)).first;
          if (v.WithinQuota(mine, req - v.Within(mine, victims))) continue;
          ++borrowed;
          const bool allowed =
              policy.while_borrowing == WhileBorrowingPreemption::kLowerPriority &&
              victim.priority < w.priority &&
              (!policy.max_priority_threshold || victim.priority <= *policy.max_priority_threshold);
          if (!allowed)
            error = victim.name + " (priority " + std::to_string(victim.priority) +
                    ") taken while borrowing by " + w.name + " (priority " +
                    std::to_string(w.priority) + ")";
        }
        if (error.empty()) break;
      }
      if (!error.empty()) RC_FAIL(error + "\n" + Dump(s) + DumpResult(s, r));
    }
  }
  RC_TAG(borrowed > 0 ? "taken while borrowing" : "none taken while borrowing");
}

// --- Liveness: when one victim would do under the rules, the cycle acts. ---

bool Acted(const CycleResult& r, WorkloadId w) {
  if (!r.preemptions.empty()) return true;
  for (const Admission& a : Admissions(r))
    if (a.workload == w) return true;
  for (const PendingDecision& p : r.pending)
    if (p.workload == w && p.reason == PendingReason::kWaitingForPreemption) return true;
  return false;
}

// Whether the pods of `victim` on some node that accepts `ps` free a pod's room there alone.
bool FreesRoomAlone(const Snapshot& s, const Workload& victim, const PodSet& ps) {
  std::map<size_t, std::pair<Resources, int32_t>> on;
  for (size_t p = 0; p < victim.placements.size(); ++p) {
    const size_t n = victim.placements[p].node.index();
    Resources rel = victim.PlacementRequest(p);
    rel[Resource::kGpu] =
        Gpus(std::popcount(victim.placements[p].gpu_mask & HealthyMask(s.nodes[n])));
    on[n].first += rel;
    ++on[n].second;
  }
  for (const auto& [n, freed] : on)
    if (Accepts(s.nodes[n], ps) && ps.request.FitsIn(freed.first)) return true;
  return false;
}

// The one waiting workload when it is a valid single pod in a valid leaf queue, and no queue
// has a lending limit (which would make the check depend on more than this).
std::optional<WorkloadId> SinglePodWaiterId(const Snapshot& s, const QueueTree& tree) {
  for (const Queue& q : s.queues)
    for (Resource res : kAllResources)
      if (q.res(res).lending_limit != kUnlimited) return std::nullopt;
  std::optional<WorkloadId> out;
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    if (!Waits(w)) continue;
    if (out) return std::nullopt;
    out = WorkloadId{static_cast<int32_t>(i)};
  }
  if (!out) return std::nullopt;
  const Workload& w = s.workloads[out->index()];
  const QueueId q = tree.Find(w.queue);
  if (!ValidateWorkload(w).empty() || w.TotalPods() != 1 || !q.valid() || !tree.valid(q) ||
      !tree.leaf(q))
    return std::nullopt;
  return out;
}

// Whether `req` fits under every limit from q up once `freed` (what victims hold in q's subtree)
// has left, for each resource `req` asks for.
struct Waiter {
  WorkloadId id;
  const Workload* w;
  QueueId queue;
  const PodSet* pods;
  Resources req;  // of its one pod
};

std::optional<Waiter> SinglePodWaiter(const View& v) {
  const std::optional<WorkloadId> id = SinglePodWaiterId(v.s, v.tree);
  if (!id) return std::nullopt;
  const Workload& w = v.s.workloads[id->index()];
  return Waiter{*id, &w, v.tree.Find(w.queue), &w.pod_sets.front(), w.pod_sets.front().request};
}

bool WithinLimits(const View& v, QueueId q, const Resources& req, const Resources& freed = {}) {
  for (QueueId a = q; a.valid(); a = v.tree.parent(a))
    for (Resource res : kAllResources) {
      const int64_t limit = v.tree.queue(a).res(res).limit;
      if (limit != kUnlimited && req[res] != 0 &&
          v.usage[a.index()][res] + req[res] - freed[res] > limit)
        return false;
    }
  return true;
}

bool ReservedFits(const View& v, QueueId q, const Workload& w) {
  if (!w.reserved()) return true;
  for (QueueId a = q; a.valid(); a = v.tree.parent(a))
    for (Resource res : kAllResources)
      if (v.tree.managed(res) && w.TotalRequest()[res] > 0 &&
          v.reserved[a.index()][res] + w.TotalRequest()[res] > v.EffectiveQuota(a, res))
        return false;
  return true;
}

int fair_applicable = 0;

std::string CheckFairShareReclaimHappens(const Snapshot& s, const CycleResult& r) {
  const View v(s, r);
  const std::optional<Waiter> waiter = SinglePodWaiter(v);
  if (!waiter) return {};
  const auto& [id, wp, p, psp, req] = *waiter;
  const Workload& w = *wp;
  const PodSet& ps = *psp;
  if (req.whole_gpus() == 0 || w.reserved() || !WithinLimits(v, p, req)) return {};
  // Within its fair share, so served in the deserved pass.
  for (Resource res : kAllResources) {
    if (!v.tree.managed(res) || req[res] == 0) continue;
    const double entitled = std::max(static_cast<double>(v.tree.queue(p).res(res).quota),
                                     v.share[p.index()][static_cast<int>(res)]);
    if (static_cast<double>(v.usage[p.index()][res] + req[res]) > entitled + 1e-9) return {};
  }
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& victim = s.workloads[i];
    const QueueId other = v.tree.Find(victim.queue);
    if (victim.state != WorkloadState::kRunning || !other.valid() || other == p ||
        !v.tree.valid(other) || !v.tree.leaf(other) || v.Protected(victim) ||
        v.faulted.contains(static_cast<int32_t>(i)) || View::Held(victim).whole_gpus() == 0 ||
        !FreesRoomAlone(s, victim, ps))
      continue;
    const std::vector<WorkloadId> set = {WorkloadId{static_cast<int32_t>(i)}};
    if (!QuotaFloorBroken(v, p, req, set, {PreemptReason::kReclaim}).empty()) continue;
    const auto [mine, theirs] = v.Sides(p, other);
    if (!mine.valid()) continue;
    Resources theirs_delta;
    theirs_delta -= View::Held(victim);
    const bool by_quota = v.WithinQuota(mine, req);
    if (!by_quota && v.Ratio(mine, req) > v.Ratio(theirs, theirs_delta) + kSlack) continue;
    if (!by_quota) ++fair_applicable;
    if (!Acted(r, id))
      return w.name + " could reclaim " + victim.name +
             (by_quota ? " by quota" : " by fair share") + ", but nothing was done";
    return {};
  }
  return {};
}

RC_GTEST_PROP(FairnessProperty, FairShareReclaimHappens, ()) {
  fair_applicable = 0;
  CheckCycles(GenFairnessSnapshot, {CheckFairShareReclaimHappens});
  RC_TAG(fair_applicable > 0 ? "by fair share" : "not by fair share");
}

int limit_applicable = 0;

std::string CheckLimitPreemption(const Snapshot& s, const CycleResult& r) {
  const View v(s, r);
  const std::optional<Waiter> waiter = SinglePodWaiter(v);
  if (!waiter) return {};
  const auto& [id, wp, p, psp, req] = *waiter;
  const Workload& w = *wp;
  const PodSet& ps = *psp;
  if (WithinLimits(v, p, req) || !ReservedFits(v, p, w)) return {};
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& victim = s.workloads[i];
    if (victim.state != WorkloadState::kRunning || victim.queue != w.queue ||
        victim.priority >= w.priority || v.Protected(victim) ||
        v.faulted.contains(static_cast<int32_t>(i)) || !FreesRoomAlone(s, victim, ps))
      continue;
    if (!WithinLimits(v, p, req, View::Held(victim))) continue;
    ++limit_applicable;
    if (!Acted(r, id))
      return w.name + " is at its limit and could preempt " + victim.name +
             " of its own queue, but nothing was done";
    return {};
  }
  return {};
}

RC_GTEST_PROP(FairnessProperty, AQueueAtItsLimitPreemptsItsOwnLowerPriorityWork, ()) {
  limit_applicable = 0;
  CheckCycles(GenFairnessSnapshot, {CheckLimitPreemption});
  RC_TAG(limit_applicable > 0 ? "at its limit" : "not at its limit");
}

// --- Every victim is needed. ---

// Per node, what is free when the cycle ends (after its binds) plus what was on its way back
// when it began (work in its grace period, work on failed GPUs), and optionally what elastic
// running work holds.
struct Room {
  std::vector<uint64_t> gpus;
  std::vector<Resources> other;  // cpu and memory
  std::vector<int32_t> pods;
};

Room RoomOf(const Snapshot& s, const CycleResult& r, bool start, bool with_elastic) {
  const QueueTree tree(s.queues);
  Room room;
  for (const Node& n : s.nodes) {
    room.gpus.push_back(HealthyMask(n));
    room.other.push_back(n.allocatable);
    room.pods.push_back(n.max_pods);
  }
  const std::set<int32_t> faulted = HardwareFaulted(r);
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    if (!Holds(w)) continue;
    const bool back =
        w.state == WorkloadState::kPreempting || faulted.contains(static_cast<int32_t>(i));
    const bool elastic =
        w.state == WorkloadState::kRunning && !w.reserved() && tree.Find(w.queue).valid();
    if (back || (with_elastic && elastic)) continue;
    for (size_t k = 0; k < w.placements.size(); ++k) {
      const size_t n = w.placements[k].node.index();
      room.gpus[n] &= ~w.placements[k].gpu_mask;
      room.other[n] -= w.PlacementRequest(k);
      --room.pods[n];
    }
  }
  if (!start) {
    for (const Admission& a : Admissions(r)) {
      const Workload& w = s.workloads[a.workload.index()];
      for (const PodAssignment& p : *a.pods) {
        const size_t n = p.placement.node.index();
        room.gpus[n] &= ~p.placement.gpu_mask;
        room.other[n] -= w.pod_sets[static_cast<size_t>(p.pod_set)].request;
        --room.pods[n];
      }
    }
  }
  return room;
}

bool FitsSomewhere(const Snapshot& s, const Room& room, const PodSet& ps,
                   const std::vector<WorkloadId>& freed) {
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    if (!Accepts(s.nodes[n], ps)) continue;
    uint64_t gpus = room.gpus[n];
    Resources other = room.other[n];
    int32_t pods = room.pods[n];
    for (WorkloadId id : freed) {
      const Workload& w = s.workloads[id.index()];
      for (size_t k = 0; k < w.placements.size(); ++k) {
        if (w.placements[k].node.index() != n) continue;
        gpus |= w.placements[k].gpu_mask & HealthyMask(s.nodes[n]);
        other += w.PlacementRequest(k);
        ++pods;
      }
    }
    if (std::popcount(gpus) >= ps.request.whole_gpus() &&
        other.cpu_milli() >= ps.request.cpu_milli() &&
        other.memory_bytes() >= ps.request.memory_bytes() && pods >= 1)
      return true;
  }
  return false;
}

std::vector<Resources> UsageBound(const View& v, bool upper);

std::string CheckEveryVictimNeeded(const Snapshot& s, const CycleResult& r) {
  // The usage a decision can have seen is at most what ran at the start plus all the cycle
  // admits and every preemptor asks: a set that frees a limit on that count freed it at the
  // decision too.
  View v(s, r);
  v.usage = UsageBound(v, /*upper=*/true);
  // Room an earlier preemptor holds (promise 10) is not room for later ones: preemptors are
  // checked in the order of their nominations, each taking its room after its check.
  Room room = RoomOf(s, r, /*start=*/false, /*with_elastic=*/false);
  const std::map<int32_t, std::vector<WorkloadId>> by_preemptor = VictimsByPreemptor(r);
  for (const NominationDecision& held : r.nominations) {
    const Workload& w = s.workloads[held.workload.index()];
    const auto take_room = [&] {
      for (const PodAssignment& a : held.pods) {
        const size_t n = a.placement.node.index();
        room.gpus[n] &= ~a.placement.gpu_mask;
        room.other[n] -= w.pod_sets[static_cast<size_t>(a.pod_set)].request;
        --room.pods[n];
      }
    };
    const auto it = by_preemptor.find(held.workload.value);
    if (it == by_preemptor.end() || w.TotalPods() != 1 || it->second.size() < 2) {
      take_room();
      continue;
    }
    const std::vector<WorkloadId>& victims = it->second;
    const QueueId p = v.tree.Find(w.queue);
    // Victims of one queue: sparing one of them keeps every rule the set kept (less is taken
    // from their queue, or, for its own queue's work, nothing else depends on it) but the limit.
    std::set<std::string> queues;
    for (WorkloadId id : victims) queues.insert(s.workloads[id.index()].queue);
    if (queues.size() != 1) {  // not checked, but its room is still not later preemptors'
      take_room();
      continue;
    }
    for (size_t i = 0; i < victims.size(); ++i) {
      const Workload& spared = s.workloads[victims[i].index()];
      std::vector<WorkloadId> rest = victims;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      if (!WithinLimits(v, p, w.TotalRequest(), v.Within(p, rest))) continue;
      if (FitsSomewhere(s, room, w.pod_sets.front(), rest))
        return w.name + ": victim " + spared.name + " was not needed";
    }
    take_room();
  }
  return {};
}

RC_GTEST_PROP(FairnessProperty, EveryVictimIsNeeded, ()) {
  CheckCycles(GenFairnessSnapshot, {CheckEveryVictimNeeded});
  CheckCycles(GenSnapshot, {CheckEveryVictimNeeded});
}

// --- Honest reasons. ---
//
// A decision's usage lies between what ran at the start less everything this cycle preempted,
// and what ran at the start plus everything it admitted and every preemptor's request.

// Whether `w` is within quota at every level with usage `usage`.
bool Guaranteed(const View& v, const std::vector<Resources>& usage, const Workload& w) {
  const Resources req = w.TotalRequest();
  for (QueueId a = v.tree.Find(w.queue); a.valid(); a = v.tree.parent(a))
    for (Resource res : kAllResources)
      if (v.tree.managed(res) && req[res] > 0 &&
          usage[a.index()][res] + req[res] > v.EffectiveQuota(a, res))
        return false;
  return true;
}

std::vector<Resources> UsageBound(const View& v, bool upper) {
  std::vector<Resources> usage = v.usage;
  auto add = [&](const Workload& w, const Resources& req, int sign) {
    for (QueueId q = v.tree.Find(w.queue); q.valid(); q = v.tree.parent(q))
      usage[q.index()] += sign > 0 ? req : Resources() - req;
  };
  if (upper) {
    for (const Admission& a : Admissions(v.r))
      add(v.s.workloads[a.workload.index()], AdmittedRequest(v.s.workloads[a.workload.index()], a),
          +1);
    // A preemptor's request counts against its queue from its preemption on.
    for (const auto& [pre, victims] : VictimsByPreemptor(v.r))
      add(v.s.workloads[static_cast<size_t>(pre)],
          v.s.workloads[static_cast<size_t>(pre)].TotalRequest(), +1);
  } else {
    for (const PreemptDecision& p : v.r.preemptions)
      if (p.reason != PreemptReason::kHardwareFault)
        add(v.s.workloads[p.workload.index()], View::Held(v.s.workloads[p.workload.index()]), -1);
  }
  return usage;
}

std::string CheckNoNodeFitsIsCapacity(const Snapshot& s, const CycleResult& r) {
  const View v(s, r);
  const std::vector<Resources> least = UsageBound(v, /*upper=*/false);
  const Room without_elastic = RoomOf(s, r, /*start=*/false, /*with_elastic=*/true);
  for (const PendingDecision& p : r.pending) {
    const Workload& w = s.workloads[p.workload.index()];
    if (p.reason != PendingReason::kNoNodeFits || w.TotalPods() != 1) continue;
    if (!Guaranteed(v, least, w) && FitsSomewhere(s, without_elastic, w.pod_sets.front(), {}))
      return w.name +
             " is NoNodeFits beyond its quota, but would fit without the elastic "
             "running work";
  }
  return {};
}

std::string CheckPolicyWaitsWouldFit(const Snapshot& s, const CycleResult& r) {
  const View v(s, r);
  const std::vector<Resources> most = UsageBound(v, /*upper=*/true);
  const Room without_elastic = RoomOf(s, r, /*start=*/true, /*with_elastic=*/true);
  for (const PendingDecision& p : r.pending) {
    const Workload& w = s.workloads[p.workload.index()];
    if ((p.reason != PendingReason::kFairShare &&
         p.reason != PendingReason::kPreemptionNotAllowed) ||
        w.TotalPods() != 1)
      continue;
    const std::string why = " waits for a rule (" + std::string(PendingReasonName(p.reason)) + ")";
    if (Guaranteed(v, most, w)) return w.name + why + ", but is within its quota";
    if (!FitsSomewhere(s, without_elastic, w.pod_sets.front(), {}))
      return w.name + why + ", but would not fit even without the elastic running work";
  }
  return {};
}

RC_GTEST_PROP(FairnessProperty, NoNodeFitsOnlyWhenCapacityIsShort, ()) {
  CheckCycles(GenSnapshot, {CheckNoNodeFitsIsCapacity});
  CheckCycles(GenFairnessSnapshot, {CheckNoNodeFitsIsCapacity});
}

RC_GTEST_PROP(FairnessProperty, PolicyWaitsWouldFitWithoutElasticWork, ()) {
  CheckCycles(GenSnapshot, {CheckPolicyWaitsWouldFit});
  CheckCycles(GenFairnessSnapshot, {CheckPolicyWaitsWouldFit});
}

// --- Decayed usage (promise 8): of two queues alike in everything but their recent use and
// their names, the one that used more is never served more in a cycle. The heavier one is
// named "a", so an engine that forgot the decayed-usage term would serve it first on every tie
// and, on a cluster with an odd number of free GPUs, give it one more.

RC_GTEST_PROP(FairnessProperty, MoreDecayedUsageNeverServesAQueueMore, ()) {
  SnapshotBuilder b;
  b.Now(kNow);
  int gpus = 0;
  for (int i = Pick(1, 4); i > 0; --i) {
    const int n = OneOf<int>({1, 2, 3, 4, 8});
    b.Node("n" + std::to_string(i), n);
    gpus += n;
  }
  const double heavy = *rc::gen::inRange(1, 100000) / 100.0;  // GPU-hours
  const double light = heavy * *rc::gen::inRange(0, 100) / 100.0 * (Chance(20) ? 0 : 1);
  const int quota = Pick(0, gpus);
  const double weight = OneOf<double>({0.5, 1, 2});
  b.Queue("a").Quota(quota).Weight(weight).DecayedUsage(heavy);
  b.Queue("b").Quota(quota).Weight(weight).DecayedUsage(light);
  if (Chance(30)) b.Queue("c").Quota(Pick(0, gpus));
  // Each wants the whole cluster, in the same single-GPU pods, priorities and submit times.
  for (int i = 0; i < gpus; ++i) {
    const int32_t priority = OneOf<int32_t>({0, 0, 10});
    for (const char* q : {"a", "b"})
      b.Workload(std::string(q) + "/w" + std::to_string(i), q)
          .Pods(1, 1)
          .Priority(priority)
          .Submit(Sec(i));
  }
  if (b.snapshot().queues.size() == 3)
    for (int i = Pick(0, gpus); i > 0; --i) b.Workload("c/w" + std::to_string(i), "c").Pods(1, 1);
  EngineConfig cfg;
  cfg.usage_half_life = std::chrono::hours(OneOf<int>({1, 24, 168}));
  cfg.usage_weight = OneOf<double>({0.1, 1, 4});
  const Snapshot s = b.snapshot();
  const CycleResult r = Engine(cfg).Schedule(s);
  int served_a = 0, served_b = 0;
  for (const BindDecision& d : r.binds) {
    const std::string& q = s.workloads[d.workload.index()].queue;
    served_a += q == "a";
    served_b += q == "b";
  }
  RC_TAG(served_a == served_b ? "even" : "lighter served more");
  if (served_a > served_b)
    RC_FAIL("queue a (" + std::to_string(heavy) + " decayed GPU-hours) got " +
            std::to_string(served_a) + " GPUs, queue b (" + std::to_string(light) + ") got " +
            std::to_string(served_b) + "\n" + Dump(s) + DumpResult(s, r));
}

}  // namespace
}  // namespace chamber::core
