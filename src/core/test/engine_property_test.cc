// Properties of scheduling cycles on random snapshots.
//
// Generators build random clusters (1-40 nodes, 0-8 GPUs, some unhealthy, cordoned or tainted,
// 1-3 blocks), random queue trees (1-8 queues, depth at most 3, occasionally invalid) and random
// workloads: running ones placed directly on free GPUs (never overlapping, within node cpu,
// memory and pod capacity; sometimes on a GPU that has since failed; elastic gangs sometimes
// with only min-member pods), pending and suspended ones with gangs of up to 8 pods, priorities
// on both sides of the reserved line, and a few invalid specs. A second generator builds small
// clusters full of borrowed GPUs with an owner that wants its quota back.
//
// Each property runs Engine::Schedule with the default configuration and checks its result:
//   a. no GPU double-booked; binds on healthy GPUs of schedulable, matching nodes with room;
//   b. no gang partly placed; c. no queue beyond its limit; d. reserved work never preempted
//   but for a failed GPU; e. reclaim within one cycle; f. determinism; g. one decision per
//   waiting workload, and queue positions in order. Also: victims are eligible, no preemption
//   when the room is already on its way back, work on failed GPUs is preempted, reserved work
//   stays within quota, and all of these over several cycles that apply each other's decisions.
//   And the victim index (EngineTuning) changes no decision: synthetic reclaim cycles of up to
//   a few hundred preemption searches decide the same with and without it.
//   And a session (EngineSession) decides as fresh cycles: over random changes made through it
//   between cycles, each of its cycles reports exactly what Engine::Schedule reports for its
//   snapshot, with and without explanations.
//
// RapidCheck runs 100 cases per property, each over a few snapshots; RC_PARAMS="max_success=N"
// runs more, and a failure prints the shrunk snapshot and the decisions.
#include <algorithm>
#include <bit>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/bench/synthetic.h"
#include "core/cluster_state.h"
#include "core/engine.h"
#include "core/gpu_model_queues.h"
#include "core/queue_tree.h"
#include "core/test/checks.h"
#include "core/test/generators.h"
#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

// The generators (generators.h) and the helpers of the checks (checks.h).
using namespace ::chamber::core::testing;  // NOLINT(google-build-using-namespace)

// --- Generators and helpers for the checks: generators.h and checks.h. ---

// --- a. No GPU is double-booked; binds use healthy GPUs on schedulable nodes, within capacity.
// With shares (docs/sharing.md, "In the engine", promise 1): a GPU held whole holds nothing
// else; the shares on one GPU hold at most all of its compute and, where they ask for memory, at
// most its memory, never memory of a GPU whose memory is unknown; a share holds exactly one GPU.

std::string CheckNoDoubleBooking(const Snapshot& s, const CycleResult& r) {
  std::vector<uint64_t> held(s.nodes.size(), 0);                         // held whole
  std::vector<uint64_t> shared(s.nodes.size(), 0);                       // holding shares
  std::map<std::pair<size_t, int>, std::pair<int64_t, int64_t>> shares;  // compute, memory
  std::vector<Resources> used(s.nodes.size());
  std::vector<int32_t> pods(s.nodes.size(), 0);
  auto take_share = [&](size_t n, uint64_t mask, const PodSet& ps) {
    auto& [milli, memory] = shares[{n, std::countr_zero(mask)}];
    milli += ps.request.gpu_milli();
    memory += ps.gpu_memory_mib;
    shared[n] |= mask;
  };
  for (const Workload& w : s.workloads) {
    if (!Holds(w)) continue;
    for (size_t i = 0; i < w.placements.size(); ++i) {
      const size_t n = w.placements[i].node.index();
      const PodSet& ps = *w.PlacementPodSet(i);
      if (ps.request.gpu_share()) {
        take_share(n, w.placements[i].gpu_mask, ps);
      } else {
        held[n] |= w.placements[i].gpu_mask;
      }
      used[n] += ps.request;
      ++pods[n];
    }
  }
  for (const Admission& a : Admissions(r)) {
    const Workload& w = s.workloads[a.workload.index()];
    for (const PodAssignment& p : *a.pods) {
      const std::string who =
          w.name + " pod " + std::to_string(p.pod_set) + "/" + std::to_string(p.replica);
      if (!p.placement.node.valid() || p.placement.node.index() >= s.nodes.size())
        return who + ": invalid node";
      const size_t n = p.placement.node.index();
      const Node& node = s.nodes[n];
      const PodSet& ps = w.pod_sets.at(static_cast<size_t>(p.pod_set));
      const uint64_t mask = p.placement.gpu_mask;
      if (!Schedulable(node)) return who + ": on unschedulable node " + node.name;
      if (!Accepts(node, ps)) return who + ": node " + node.name + " fails its constraints";
      if ((mask & ~HealthyMask(node)) != 0)
        return who + ": unhealthy or missing GPU on " + node.name;
      if ((mask & held[n]) != 0) return who + ": GPU already held on " + node.name;
      if (ps.request.gpu_share()) {
        if (std::popcount(mask) != 1) return who + ": a share holds other than one GPU";
        take_share(n, mask, ps);
        const int g = std::countr_zero(mask);
        const auto& [milli, memory] = shares[{n, g}];
        if (milli > kMilliPerGpu)
          return who + ": shares hold " + FormatGpus(milli) + " of GPU " + std::to_string(g) +
                 " on " + node.name;
        const int64_t capacity = node.gpus[static_cast<size_t>(g)].memory_mib;
        if (ps.gpu_memory_mib > 0 && memory > capacity)
          return who + ": shares hold " + std::to_string(memory) + " MiB of GPU " +
                 std::to_string(g) + " on " + node.name + ", which has " + std::to_string(capacity);
      } else {
        if ((mask & shared[n]) != 0)
          return who + ": GPU holding shares taken whole on " + node.name;
        if (std::popcount(mask) != ps.request.whole_gpus())
          return who + ": GPU count differs from its request";
        held[n] |= mask;
      }
      used[n] += ps.request;
      ++pods[n];
      if (used[n].cpu_milli() > node.allocatable.cpu_milli()) return who + ": cpu overcommitted";
      if (used[n].memory_bytes() > node.allocatable.memory_bytes())
        return who + ": memory overcommitted";
      if (pods[n] > node.max_pods) return who + ": pod limit exceeded on " + node.name;
    }
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, NoGpuDoubleBooked, ()) {
  CheckCycles(GenSnapshot, {CheckNoDoubleBooking});
}

// --- b. No gang is partly placed: all pods, or at least min-member of them (the first ones).
// A gang whose last pods do not exist yet is not placed at all, and says why; nor is a gang in
// bind backoff.

std::string CheckGangs(const Snapshot& s, const CycleResult& r) {
  for (const PendingDecision& p : r.pending) {
    const Workload& w = s.workloads[p.workload.index()];
    const bool earlier_cause =
        p.reason == PendingReason::kInvalidWorkload || p.reason == PendingReason::kQueueNotFound ||
        p.reason == PendingReason::kQueueInvalid || p.reason == PendingReason::kNotLeafQueue;
    if (w.awaited_pods > 0 && p.reason != PendingReason::kWaitingForPods && !earlier_cause)
      return w.name + ": waits for " + std::to_string(w.awaited_pods) + " pods, but says " +
             std::string(PendingReasonName(p.reason));
    if (w.awaited_pods == 0 && p.reason == PendingReason::kWaitingForPods)
      return w.name + ": has all its pods, but says WaitingForPods";
    const bool backing_off = w.bind_retry_at > s.now;
    if (backing_off && w.awaited_pods == 0 && p.reason != PendingReason::kBindBackoff &&
        !earlier_cause)
      return w.name + ": in bind backoff, but says " + std::string(PendingReasonName(p.reason));
    if (!backing_off && p.reason == PendingReason::kBindBackoff)
      return w.name + ": says BindBackoff after its backoff";
  }
  for (const Admission& a : Admissions(r)) {
    const Workload& w = s.workloads[a.workload.index()];
    if (w.awaited_pods > 0)
      return w.name + ": placed while " + std::to_string(w.awaited_pods) +
             " of its pods do not exist";
    if (w.bind_retry_at > s.now) return w.name + ": placed during its bind backoff";
    const int32_t total = w.TotalPods();
    const int32_t placed = static_cast<int32_t>(a.pods->size());
    const int32_t minimum = w.min_member > 0 ? w.min_member : total;
    if (placed < minimum || placed > total)
      return w.name + ": " + std::to_string(placed) + " pods placed of " + std::to_string(total) +
             ", min-member " + std::to_string(w.min_member);
    // The placed pods are the first `placed` in pod-set order, each once.
    size_t k = 0;
    for (size_t set = 0; set < w.pod_sets.size() && k < a.pods->size(); ++set) {
      for (int32_t rep = 0; rep < w.pod_sets[set].count && k < a.pods->size(); ++rep, ++k) {
        const PodAssignment& p = (*a.pods)[k];
        if (p.pod_set != static_cast<int32_t>(set) || p.replica != rep)
          return w.name + ": pods not the first ones in pod-set order";
      }
    }
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, NoGangPartlyPlaced, ()) { CheckCycles(GenSnapshot, {CheckGangs}); }

// --- c. No queue exceeds its limit.
// Usage is what the engine counts against a queue: running work of its subtree (preempting
// work and this cycle's victims no longer count) plus this cycle's binds and resumes. A queue
// may already be over its limit when the cycle starts (the limit was lowered); then nothing
// that needs more of that resource may be admitted into it. Precisely, per valid queue and
// resource with a limit: if anything admitted into the subtree requests the resource, usage
// after the cycle is within the limit.

std::string CheckLimits(const Snapshot& s, const CycleResult& r) {
  const QueueTree tree(s.queues);
  std::set<int32_t> victims;
  for (const PreemptDecision& p : r.preemptions) victims.insert(p.workload.value);
  std::vector<Resources> after(s.queues.size()), added(s.queues.size());
  auto add = [&](const Workload& w, const Resources& req, bool admitted) {
    for (QueueId a = tree.Find(w.queue); a.valid(); a = tree.parent(a)) {
      after[a.index()] += req;
      if (admitted) added[a.index()] += req;
    }
  };
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    if (w.state == WorkloadState::kRunning && !victims.contains(static_cast<int32_t>(i)))
      add(w, w.RequestOfFirst(static_cast<int32_t>(w.placements.size())), false);
  }
  for (const Admission& a : Admissions(r)) {
    const Workload& w = s.workloads[a.workload.index()];
    add(w, AdmittedRequest(w, a), true);
  }
  for (QueueId q : tree.top_down()) {
    for (Resource res : kAllResources) {
      const int64_t limit = tree.queue(q).res(res).limit;
      if (limit == kUnlimited || added[q.index()][res] == 0) continue;
      if (after[q.index()][res] > limit)
        return "queue " + tree.queue(q).name + ": " + FormatQuantity(res, after[q.index()][res]) +
               " after the cycle, limit " + FormatQuantity(res, limit);
    }
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, NoQueueExceedsItsLimit, ()) {
  CheckCycles(GenSnapshot, {CheckLimits});
}

// --- d. Reserved work is never preempted, except when it holds a failed GPU.

std::string CheckReservedSafe(const Snapshot& s, const CycleResult& r) {
  std::set<int32_t> seen;
  for (const PreemptDecision& p : r.preemptions) {
    const Workload& w = s.workloads[p.workload.index()];
    if (!seen.insert(p.workload.value).second) return w.name + ": preempted twice";
    if (w.state != WorkloadState::kRunning) return w.name + ": preempted but not running";
    if (w.reserved() && p.reason != PreemptReason::kHardwareFault)
      return w.name + ": reserved work preempted for " + std::string(PreemptReasonName(p.reason));
    if (p.reason == PreemptReason::kHardwareFault) {
      bool on_failed = false;
      for (const PodPlacement& pl : w.placements)
        on_failed |= (pl.gpu_mask & ~HealthyMask(s.nodes[pl.node.index()])) != 0;
      if (!on_failed) return w.name + ": HardwareFault without a failed GPU";
    }
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, ReservedNeverPreemptedExceptHardwareFault, ()) {
  CheckCycles(GenSnapshot, {CheckReservedSafe});
}

// --- Also: victims are eligible. A Priority victim is lower-priority work of the preemptor's own
// queue (or, where the queue's policy says LowerOrNewerEqualPriority, equal-priority work
// submitted after it); a Reclaim victim is in another queue, of lower priority where the
// preemptor's queue reclaims only lower priorities; neither is reserved, younger than the minimum
// runtime, or preempted too often lately; no preemptor preempts against its queue's policy or
// before its queue's preemption delay. The preemptor waits for them: it is pending with
// WaitingForPreemption and names each of its victims.

std::string CheckVictimsEligible(const Snapshot& s, const CycleResult& r) {
  const EngineConfig cfg;
  const QueueTree tree(s.queues);
  for (const PreemptDecision& p : r.preemptions) {
    if (p.reason == PreemptReason::kHardwareFault) continue;
    const Workload& v = s.workloads[p.workload.index()];
    if (!p.preemptor.valid() || p.preemptor.index() >= s.workloads.size())
      return v.name + ": preempted without a preemptor";
    const Workload& pre = s.workloads[p.preemptor.index()];
    const QueueId pq = tree.Find(pre.queue);
    const QueuePreemption& policy = tree.queue(pq).preemption;
    if (p.reason == PreemptReason::kPriority) {
      const bool newer_equal =
          policy.within_queue == WithinQueuePreemption::kLowerOrNewerEqualPriority &&
          v.priority == pre.priority && v.submit_time > pre.submit_time;
      if (v.queue != pre.queue || (v.priority >= pre.priority && !newer_equal))
        return v.name + ": priority victim of " + pre.name + " not lower priority in its queue";
      if (policy.within_queue == WithinQueuePreemption::kNever)
        return v.name + ": preempted in " + pre.queue + ", whose policy preempts none of its work";
    }
    if (p.reason == PreemptReason::kReclaim) {
      if (v.queue == pre.queue) return v.name + ": reclaimed for its own queue";
      if (policy.reclaim == ReclaimPreemption::kNever)
        return v.name + ": reclaimed for " + pre.queue + ", whose policy reclaims from no queue";
      if (policy.reclaim == ReclaimPreemption::kLowerPriority && v.priority >= pre.priority)
        return v.name + ": reclaimed for " + pre.name + " of no higher priority";
    }
    if (s.now - pre.submit_time < policy.delay)
      return pre.name + ": preempted before its queue's preemption delay";
    if (v.reserved()) return v.name + ": reserved victim";
    if (s.now - v.start_time < cfg.min_runtime) return v.name + ": victim below minimum runtime";
    int32_t recent = 0;
    for (Time t : v.recent_preemptions)
      if (s.now - t < cfg.preemption_window) ++recent;
    if (recent >= cfg.max_preemptions_per_window) return v.name + ": victim out of budget";
    const std::string detail =
        "victim " + v.name + " (" + std::string(PreemptReasonName(p.reason)) + ")";
    const auto waits = std::find_if(r.pending.begin(), r.pending.end(), [&](const auto& d) {
      return d.workload == p.preemptor && d.reason == PendingReason::kWaitingForPreemption &&
             std::find(d.details().begin(), d.details().end(), detail) != d.details().end();
    });
    if (waits == r.pending.end()) return pre.name + " does not wait for its victim " + v.name;
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, VictimsAreEligible, ()) {
  CheckCycles(GenSnapshot, {CheckVictimsEligible});
}

// --- Also: no needless preemption. A single-pod preemptor within its queue limits that would fit
// on capacity that is free at the end of the cycle plus capacity already on its way back when
// the cycle began (victims in their grace period, work on failed GPUs) must wait for that
// rather than evict more. Free capacity only shrinks during a cycle and released capacity only
// grows, so the preemptor had at least this much room at its turn; for a single pod, placement
// finds a node whenever one fits, so this can fail only when the engine preempts with room in hand.
// Room an earlier preemptor of the cycle holds (its nomination, promise 10) is not room for later
// ones: the checks go in the order of the nominations, each taking its room after its check.

// A preemptor whose queue is at a limit may need victims to get under it, room or not
// (docs/fairness.md, promise 2). Usage never exceeds what runs at the start plus what the cycle
// admits and its preemptors ask, so a preemptor within its limits on that count needed its
// victims for room.
class LimitBound {
 public:
  LimitBound(const Snapshot& s, const CycleResult& r) : tree_(s.queues), most_(s.queues.size()) {
    for (const Workload& w : s.workloads)
      if (w.state == WorkloadState::kRunning)
        Add(w, w.RequestOfFirst(static_cast<int32_t>(w.placements.size())));
    for (const Admission& a : Admissions(r))
      Add(s.workloads[a.workload.index()], AdmittedRequest(s.workloads[a.workload.index()], a));
    std::set<int32_t> nominated;  // a preemptor's request counts from its preemption on
    for (const PreemptDecision& p : r.preemptions)
      if (p.reason != PreemptReason::kHardwareFault && nominated.insert(p.preemptor.value).second)
        Add(s.workloads[p.preemptor.index()], s.workloads[p.preemptor.index()].TotalRequest());
  }
  bool MayBeAtLimit(const Workload& w) const {
    const Resources req = w.TotalRequest();
    for (QueueId a = tree_.Find(w.queue); a.valid(); a = tree_.parent(a))
      for (Resource res : kAllResources) {
        const int64_t limit = tree_.queue(a).res(res).limit;
        if (limit != kUnlimited && req[res] > 0 && most_[a.index()][res] + req[res] > limit)
          return true;
      }
    return false;
  }

 private:
  void Add(const Workload& w, const Resources& req) {
    for (QueueId a = tree_.Find(w.queue); a.valid(); a = tree_.parent(a)) most_[a.index()] += req;
  }
  QueueTree tree_;
  std::vector<Resources> most_;
};

std::string CheckNoNeedlessPreemption(const Snapshot& s, const CycleResult& r) {
  std::vector<NodeRoom> free = InitialRoom(s), back(s.nodes.size());
  for (size_t n = 0; n < s.nodes.size(); ++n) free[n].gpus &= HealthyMask(s.nodes[n]);
  auto take = [&](NodeRoom& room, const PodPlacement& p, const Resources& req, MigAsk mig) {
    room.gpus &= ~p.gpu_mask;
    room.cpu -= req.cpu_milli();
    room.memory -= req.memory_bytes();
    room.pods -= 1;
    if (mig.any()) room.mig[static_cast<size_t>(mig.profile)] -= mig.devices;
  };
  auto give = [&](NodeRoom& room, const PodPlacement& p, const Resources& req, MigAsk mig) {
    room.gpus |= p.gpu_mask & HealthyMask(s.nodes[p.node.index()]);
    room.cpu += req.cpu_milli();
    room.memory += req.memory_bytes();
    room.pods += 1;
    if (mig.any()) room.mig[static_cast<size_t>(mig.profile)] += mig.devices;
  };
  const std::set<int32_t> faulted = HardwareFaulted(r);
  // A GPU holding shares comes back only when every share on it does; until then, the room of
  // its leaving shares is room beside those that stay. A GPU a nomination uses is its own.
  struct GpuShares {
    int64_t milli = 0;  // of the shares that stay and those admitted
    int64_t memory_mib = 0;
    int staying = 0;
    bool nominated = false;
  };
  std::map<std::pair<size_t, int>, GpuShares> shares;
  auto add_share = [&](size_t n, uint64_t gpus, const PodSet& ps, bool returning) {
    GpuShares& g = shares[{n, std::countr_zero(gpus)}];
    if (returning) return;
    ++g.staying;
    g.milli += ps.request.gpu_milli();
    g.memory_mib += ps.gpu_memory_mib;
  };
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    if (!Holds(w)) continue;
    const bool returning =
        w.state == WorkloadState::kPreempting || faulted.contains(static_cast<int32_t>(i));
    for (size_t k = 0; k < w.placements.size(); ++k) {
      const PodPlacement& p = w.placements[k];
      const Resources request = w.PlacementRequest(k);
      const PodSet* ps = w.PlacementPodSet(k);
      const MigAsk mig = ps != nullptr ? ps->mig : MigAsk{};
      take(free[p.node.index()], p, request, mig);
      if (request.gpu_share()) add_share(p.node.index(), p.gpu_mask, *ps, returning);
      if (returning) give(back[p.node.index()], p, request, mig);
    }
  }
  for (const auto& [gpu, g] : shares)
    if (g.staying > 0) back[gpu.first].gpus &= ~(uint64_t{1} << gpu.second);
  for (const Admission& a : Admissions(r)) {
    const Workload& w = s.workloads[a.workload.index()];
    for (const PodAssignment& p : *a.pods) {
      const PodSet& ps = w.pod_sets[static_cast<size_t>(p.pod_set)];
      take(free[p.placement.node.index()], p.placement, ps.request, ps.mig);
      // A share bound beside leaving shares keeps their GPU.
      if (ps.request.gpu_share()) {
        back[p.placement.node.index()].gpus &= ~p.placement.gpu_mask;
        add_share(p.placement.node.index(), p.placement.gpu_mask, ps, false);
      }
    }
  }
  // Whether a share of `ps` fits on node n's GPUs: on a free or returning GPU, or beside shares.
  auto share_fits = [&](size_t n, const PodSet& ps) {
    const Node& node = s.nodes[n];
    auto memory_fits = [&](int g, int64_t used) {
      return ps.gpu_memory_mib == 0 ||
             used + ps.gpu_memory_mib <= node.gpus[static_cast<size_t>(g)].memory_mib;
    };
    for (uint64_t m = free[n].gpus | back[n].gpus; m != 0; m &= m - 1)
      if (memory_fits(std::countr_zero(m), 0)) return true;
    for (const auto& [gpu, g] : shares) {
      if (gpu.first != n || g.nominated || g.staying == 0) continue;
      if (((HealthyMask(node) >> gpu.second) & 1) == 0) continue;
      if (g.milli + ps.request.gpu_milli() <= kMilliPerGpu && memory_fits(gpu.second, g.memory_mib))
        return true;
    }
    return false;
  };
  const LimitBound limits(s, r);
  auto may_be_at_limit = [&](const Workload& w) { return limits.MayBeAtLimit(w); };
  std::set<int32_t> preemptors;
  for (const PreemptDecision& p : r.preemptions)
    if (p.reason != PreemptReason::kHardwareFault) preemptors.insert(p.preemptor.value);
  for (const NominationDecision& held : r.nominations) {
    const Workload& w = s.workloads[held.workload.index()];
    if (preemptors.contains(held.workload.value) && w.TotalPods() == 1 && !may_be_at_limit(w)) {
      const PodSet& ps = w.pod_sets.front();
      for (size_t n = 0; n < s.nodes.size(); ++n) {
        if (!Accepts(s.nodes[n], ps)) continue;
        const bool gpus_fit = ps.request.gpu_share() ? share_fits(n, ps)
                                                     : std::popcount(free[n].gpus | back[n].gpus) >=
                                                           ps.request.whole_gpus();
        const bool mig_fits =
            !ps.mig.any() || free[n].mig[static_cast<size_t>(ps.mig.profile)] +
                                     back[n].mig[static_cast<size_t>(ps.mig.profile)] >=
                                 ps.mig.devices;
        if (gpus_fit && mig_fits && free[n].cpu + back[n].cpu >= ps.request.cpu_milli() &&
            free[n].memory + back[n].memory >= ps.request.memory_bytes() &&
            free[n].pods + back[n].pods >= 1)
          return w.name + " preempted although node " + s.nodes[n].name + " had room for it";
      }
    }
    for (const PodAssignment& a : held.pods) {
      const size_t n = a.placement.node.index();
      back[n].gpus &= ~a.placement.gpu_mask;
      const PodSet& ps = w.pod_sets[static_cast<size_t>(a.pod_set)];
      take(free[n], a.placement, ps.request, MigAsk{});
      if (ps.mig.any()) {  // what is free first, then what its victims return
        const auto p = static_cast<size_t>(ps.mig.profile);
        const int from_free = std::clamp(free[n].mig[p], 0, int{ps.mig.devices});
        free[n].mig[p] -= from_free;
        back[n].mig[p] -= ps.mig.devices - from_free;
      }
      for (uint64_t m = a.placement.gpu_mask; m != 0; m &= m - 1)
        shares[{n, std::countr_zero(m)}].nominated = true;
    }
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, NoNeedlessPreemption, ()) {
  CheckCycles(GenSnapshot, {CheckNoNeedlessPreemption});
}

// --- Also: a preemptor keeps the room it preempted for (docs/fairness.md, promise 10). Every
// workload that preempts is nominated: pods on healthy GPUs of nodes that accept them, as many
// GPUs as each asks, each GPU free when the cycle began or held by work that is leaving (victims
// in their grace period, this cycle's victims). No GPU of a nomination goes to anything bound or
// resumed in the same cycle, or to another nomination. A nominated share is on one healthy GPU
// that nothing staying, admitted or nominated holds whole (a leaving pod may hold it whole), and
// the shares that stay, those admitted and those nominated on a GPU add up to at most its
// compute and memory: two preemptors never count on the same leaving share's room. A GPU
// nominated whole holds no share of work that stays.

std::string CheckPreemptorKeepsItsRoom(const Snapshot& s, const CycleResult& r) {
  std::set<int32_t> leaving;  // this cycle's victims and work in its grace period
  for (const PreemptDecision& p : r.preemptions) leaving.insert(p.workload.value);
  std::vector<uint64_t> staying(s.nodes.size(), 0);  // GPUs held by work that is not leaving
  std::vector<uint64_t> shared(s.nodes.size(), 0);   // GPUs with shares of work that stays
  // Compute and memory of the shares that stay, are admitted or are nominated, per GPU.
  std::map<std::pair<size_t, int>, std::pair<int64_t, int64_t>> share_held;
  auto add_share = [&](size_t n, uint64_t gpus, const PodSet& ps, bool stays) {
    if (!stays) return;
    shared[n] |= gpus;
    auto& [milli, memory] = share_held[{n, std::countr_zero(gpus)}];
    milli += ps.request.gpu_milli();
    memory += ps.gpu_memory_mib;
  };
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    if (!Holds(w)) continue;
    for (size_t k = 0; k < w.placements.size(); ++k) {
      const PodPlacement& p = w.placements[k];
      const PodSet* ps = w.PlacementPodSet(k);
      const bool stays =
          w.state != WorkloadState::kPreempting && !leaving.contains(static_cast<int32_t>(i));
      if (ps != nullptr && ps->request.gpu_share()) {
        add_share(p.node.index(), p.gpu_mask, *ps, stays);
      } else if (stays) {
        staying[p.node.index()] |= p.gpu_mask;
      }
    }
  }
  std::vector<uint64_t> taken(s.nodes.size(), 0);  // GPUs admitted whole this cycle
  for (const Admission& a : Admissions(r)) {
    const Workload& w = s.workloads[a.workload.index()];
    for (const PodAssignment& p : *a.pods) {
      const PodSet& ps = w.pod_sets[static_cast<size_t>(p.pod_set)];
      if (ps.request.gpu_share()) {
        add_share(p.placement.node.index(), p.placement.gpu_mask, ps, true);
      } else {
        taken[p.placement.node.index()] |= p.placement.gpu_mask;
      }
    }
  }
  std::set<int32_t> nominated;
  std::vector<uint64_t> held(s.nodes.size(), 0);  // GPUs of nominations so far
  for (const NominationDecision& d : r.nominations) {
    const Workload& w = s.workloads[d.workload.index()];
    if (!nominated.insert(d.workload.value).second) return w.name + " is nominated twice";
    if (w.state == WorkloadState::kRunning || w.state == WorkloadState::kPreempting)
      return w.name + " is nominated but already holds its room";
    if (d.pods.empty()) return w.name + ": empty nomination";
    for (const PodAssignment& p : d.pods) {
      const std::string who =
          w.name + " pod " + std::to_string(p.pod_set) + "/" + std::to_string(p.replica);
      if (!p.placement.node.valid() || p.placement.node.index() >= s.nodes.size())
        return who + ": nominated to an invalid node";
      const size_t n = p.placement.node.index();
      const Node& node = s.nodes[n];
      const PodSet& ps = w.pod_sets.at(static_cast<size_t>(p.pod_set));
      const uint64_t gpus = p.placement.gpu_mask;
      if (!Accepts(node, ps)) return who + ": nominated to " + node.name + ", which refuses it";
      if ((gpus & ~HealthyMask(node)) != 0) return who + ": nominated to a failed GPU";
      if ((gpus & (staying[n] | taken[n] | held[n])) != 0 && ps.request.gpu_share())
        return who + ": a share nominated to a GPU of " + node.name + " held whole";
      if (ps.request.gpu_share()) {
        if (std::popcount(gpus) != 1) return who + ": a nominated share holds other than one GPU";
        const int g = std::countr_zero(gpus);
        add_share(n, gpus, ps, true);
        const auto& [milli, memory] = share_held[{n, g}];
        if (milli > kMilliPerGpu)
          return who + ": shares over-commit the compute of a GPU of " + node.name +
                 " with its nomination";
        if (ps.gpu_memory_mib > 0 && memory > node.gpus[static_cast<size_t>(g)].memory_mib)
          return who + ": shares over-commit the memory of a GPU of " + node.name +
                 " with its nomination";
        continue;
      }
      if ((gpus & shared[n]) != 0)
        return who + ": nominated whole to a GPU of " + node.name + " that holds shares";
      if (std::popcount(gpus) != ps.request.whole_gpus())
        return who + ": nominated GPUs != its request";
      if ((gpus & staying[n]) != 0)
        return who + ": nominated to a GPU of " + node.name + " held by work that stays";
      if ((gpus & taken[n]) != 0)
        return who + ": a GPU of its nomination on " + node.name + " went to work admitted " +
               "in the same cycle";
      if ((gpus & held[n]) != 0)
        return who + ": a GPU of its nomination on " + node.name + " is another's nomination";
      held[n] |= gpus;
    }
  }
  for (const PreemptDecision& p : r.preemptions)
    if (p.reason != PreemptReason::kHardwareFault && !nominated.contains(p.preemptor.value))
      return s.workloads[p.preemptor.index()].name + " preempts but is not nominated";
  return {};
}

// --- Also: running work on a failed GPU is preempted with HardwareFault, whatever its queue.

std::string CheckHardwareFaults(const Snapshot& s, const CycleResult& r) {
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    if (w.state != WorkloadState::kRunning) continue;
    bool on_failed = false;
    for (const PodPlacement& pl : w.placements)
      on_failed |= (pl.gpu_mask & ~HealthyMask(s.nodes[pl.node.index()])) != 0;
    if (!on_failed) continue;
    const bool faulted =
        std::any_of(r.preemptions.begin(), r.preemptions.end(), [&](const auto& p) {
          return p.workload.index() == i && p.reason == PreemptReason::kHardwareFault;
        });
    if (!faulted) return w.name + " holds a failed GPU but was not preempted for it";
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, WorkOnFailedGpuIsPreempted, ()) {
  CheckCycles(GenSnapshot, {CheckHardwareFaults});
}

// --- Also: reserved work stays within quota, at every level (docs/fairness.md, promise 3).
// Reserved work is admitted only while its queue and each ancestor stay within their effective
// quota for each managed resource it requests. So once reserved work requesting a resource is
// admitted into a queue's subtree, the reserved work there (running, not preempted, plus
// admitted) fits the queue's effective quota of that resource. (Reserved work already beyond
// quota before the cycle, after a quota cut, may stay; then no reserved work that needs more of
// the resource is admitted.)

std::string CheckReservedWithinQuota(const Snapshot& s, const CycleResult& r) {
  const QueueTree tree(s.queues);
  std::set<int32_t> victims;
  for (const PreemptDecision& p : r.preemptions) victims.insert(p.workload.value);
  std::vector<Resources> reserved(s.queues.size()), admitted(s.queues.size());
  auto add = [&](std::vector<Resources>& to, QueueId q, const Resources& req) {
    for (QueueId a = q; a.valid(); a = tree.parent(a)) to[a.index()] += req;
  };
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    const QueueId q = tree.Find(w.queue);
    if (q.valid() && w.reserved() && w.state == WorkloadState::kRunning &&
        !victims.contains(static_cast<int32_t>(i)))
      add(reserved, q, w.RequestOfFirst(static_cast<int32_t>(w.placements.size())));
  }
  for (const Admission& a : Admissions(r)) {
    const Workload& w = s.workloads[a.workload.index()];
    const QueueId q = tree.Find(w.queue);
    if (!w.reserved() || !q.valid()) continue;
    add(reserved, q, AdmittedRequest(w, a));
    add(admitted, q, AdmittedRequest(w, a));
  }
  for (QueueId q : tree.top_down()) {
    for (Resource res : kAllResources) {
      if (!tree.managed(res) || admitted[q.index()][res] == 0) continue;
      const int64_t quota = EffectiveQuota(tree, q, res);
      if (reserved[q.index()][res] > quota)
        return "queue " + tree.queue(q).name + ": reserved work holds " +
               FormatQuantity(res, reserved[q.index()][res]) + ", quota " +
               FormatQuantity(res, quota);
    }
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, ReservedWorkStaysWithinQuota, ()) {
  CheckCycles(GenSnapshot, {CheckReservedWithinQuota});
}

// --- e. Reclaim within one cycle.
//
// For a waiting workload W in leaf queue Q, the engine must act (bind W, preempt someone, or
// make W wait for preemption) when all of these hold at the start of the cycle:
//   1. W is valid, has exactly one pod (none still to be created), and is pending or
//      suspended; Q is a valid leaf queue whose policy lets W reclaim (not `Never`; with
//      `LowerPriority`, from work of lower priority only, in 4), and W has waited its delay.
//   2. W asks for some managed resource, and fits Q's quota and limit, and every ancestor's:
//      usage + W's request <= quota (every managed resource) and <= limit (every resource with a
//      limit). Then W is served in the deserved pass, within quota, so it may reclaim; and it is
//      not borrowing, so no lending limit applies.
//   3. No other workload waits in Q's tree (the subtree of Q's root): nothing else admitted in
//      this cycle can use up Q's or an ancestor's quota before W's turn, and no earlier
//      workload of Q can have cached a failed victim search for W's shape.
//   4. Some node N accepts W's pod (schedulable, selector, taints, model) and holds one
//      reclaimable workload whose pods on N alone release enough for W (healthy GPUs, cpu,
//      memory, a pod slot): running, elastic, holding GPUs, past the minimum runtime, under its
//      preemption budget, in a valid leaf queue other than Q, and its leaving keeps that queue
//      and each ancestor up to its side at or above its effective quota of what W asks for
//      (docs/fairness.md, promise 1).
// Free capacity is not counted in 4, so binds of other queues earlier in the cycle cannot
// invalidate it; the only things that can change before W's turn are preemptions (which satisfy
// the conclusion) and binds into the borrowing queues (which keep them borrowing).

struct ReclaimCheck {
  int applicable = 0;
  std::string error;
};

ReclaimCheck CheckReclaim(const Snapshot& s, const CycleResult& r, const EngineConfig& cfg) {
  ReclaimCheck out;
  if (!cfg.reclaim_enabled) return out;
  const QueueTree tree(s.queues);
  // Usage as the cycle's decisions see it: work on a failed GPU is preempted first.
  std::vector<Resources> usage(s.queues.size());
  for (const Workload& w : s.workloads) {
    if (w.state != WorkloadState::kRunning) continue;
    bool on_failed = false;
    for (const PodPlacement& pl : w.placements)
      on_failed |= (pl.gpu_mask & ~HealthyMask(s.nodes[pl.node.index()])) != 0;
    if (on_failed && cfg.preempt_on_unhealthy_gpu) continue;
    for (QueueId a = tree.Find(w.queue); a.valid(); a = tree.parent(a))
      usage[a.index()] += w.RequestOfFirst(static_cast<int32_t>(w.placements.size()));
  }
  auto root_of = [&](QueueId q) {
    while (tree.parent(q).valid()) q = tree.parent(q);
    return q;
  };
  // Whether a share on GPU `gpu` of node n is leaving when the cycle begins.
  std::set<std::pair<size_t, uint64_t>> leaving_shares;
  for (const Workload& w : s.workloads)
    if (w.state == WorkloadState::kPreempting)
      for (size_t p = 0; p < w.placements.size(); ++p)
        if (w.PlacementRequest(p).gpu_share())
          leaving_shares.insert({w.placements[p].node.index(), w.placements[p].gpu_mask});
  auto leaving_share = [&](size_t n, uint64_t gpu) { return leaving_shares.contains({n, gpu}); };
  auto is_protected = [&](const Workload& v) {
    if (v.reserved() || s.now - v.start_time < cfg.min_runtime) return true;
    int32_t recent = 0;
    for (Time t : v.recent_preemptions)
      if (s.now - t < cfg.preemption_window) ++recent;
    return recent >= cfg.max_preemptions_per_window;
  };

  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    const WorkloadId id{static_cast<int32_t>(i)};
    // 1. (A gang still waiting for its pods to exist is not placed, so it reclaims nothing.)
    if (!Waits(w) || !ValidateWorkload(w).empty() || w.TotalPods() != 1 || w.awaited_pods > 0)
      continue;
    const QueueId q = tree.Find(w.queue);
    if (!q.valid() || !tree.valid(q) || !tree.leaf(q)) continue;
    // (Its queue's policy lets it reclaim, and it has waited the queue's preemption delay.)
    const QueuePreemption& policy = tree.queue(q).preemption;
    if (policy.reclaim == ReclaimPreemption::kNever || s.now - w.submit_time < policy.delay)
      continue;
    const PodSet& ps = w.pod_sets.front();
    const Resources req = ps.request;
    // 2. (A workload that asks for no managed resource has no quota to take back.)
    bool asks = false;
    for (Resource res : kAllResources) asks |= tree.managed(res) && req[res] > 0;
    if (!asks) continue;
    bool fits_quota = true;
    for (QueueId a = q; a.valid(); a = tree.parent(a)) {
      for (Resource res : kAllResources) {
        const QueueResource& qr = tree.queue(a).res(res);
        if (req[res] == 0) continue;
        if (tree.managed(res) && usage[a.index()][res] + req[res] > qr.quota) fits_quota = false;
        if (qr.limit != kUnlimited && usage[a.index()][res] + req[res] > qr.limit)
          fits_quota = false;
      }
    }
    if (!fits_quota) continue;
    // 3.
    const QueueId root = root_of(q);
    bool alone = true;
    for (size_t j = 0; j < s.workloads.size(); ++j) {
      if (j == i || !Waits(s.workloads[j])) continue;
      const QueueId other = tree.Find(s.workloads[j].queue);
      if (other.valid() && tree.valid(other) && root_of(other) == root) alone = false;
    }
    if (!alone) continue;
    // 4.
    bool room = false;
    for (const Workload& v : s.workloads) {
      if (room) break;
      if (v.state != WorkloadState::kRunning || is_protected(v)) continue;
      if (policy.reclaim == ReclaimPreemption::kLowerPriority && v.priority >= w.priority) continue;
      const QueueId o = tree.Find(v.queue);
      if (!o.valid() || o == q || !tree.valid(o) || !tree.leaf(o)) continue;
      const Resources held = v.RequestOfFirst(static_cast<int32_t>(v.placements.size()));
      if (held.gpu_milli() == 0) continue;
      // Its queue keeps its quota of what W asks for, from its leaf up to its side.
      const QueueId side = tree.Sides(q, o).second;
      bool keeps_quota = side.valid();
      for (QueueId b = o; keeps_quota; b = tree.parent(b)) {
        for (Resource res : kAllResources)
          if (tree.managed(res) && req[res] > 0 &&
              usage[b.index()][res] - held[res] < tree.effective_quota(b)[res])
            keeps_quota = false;
        if (b == side) break;
      }
      if (!keeps_quota) continue;
      // What V releases per node: whole healthy GPUs, and its shares' room on GPUs none of
      // whose shares is leaving already (a leaving share's room may be another's). A share fits
      // in a whole GPU with the memory it asks, or in V's share of one GPU alone.
      std::vector<Resources> releasable(s.nodes.size());
      std::vector<int32_t> releasable_pods(s.nodes.size(), 0);
      std::vector<uint8_t> share_room(s.nodes.size(), 0);
      for (size_t p = 0; p < v.placements.size(); ++p) {
        const PodPlacement& vp = v.placements[p];
        const size_t n = vp.node.index();
        const PodSet* vps = v.PlacementPodSet(p);
        Resources rel = v.PlacementRequest(p);
        const uint64_t healthy = vp.gpu_mask & HealthyMask(s.nodes[n]);
        if (rel.gpu_share()) {
          rel[Resource::kGpu] = 0;
          if (healthy != 0 && req.gpu_share() && vps->request.gpu_milli() >= req.gpu_milli() &&
              vps->gpu_memory_mib >= ps.gpu_memory_mib && !leaving_share(n, healthy))
            share_room[n] = 1;
        } else {
          rel[Resource::kGpu] = Gpus(std::popcount(healthy));
          for (uint64_t m = healthy; m != 0 && req.gpu_share(); m &= m - 1)
            if (ps.gpu_memory_mib <= s.nodes[n].gpus[std::countr_zero(m)].memory_mib)
              share_room[n] = 1;
        }
        releasable[n] += rel;
        ++releasable_pods[n];
      }
      for (size_t n = 0; n < s.nodes.size() && !room; ++n) {
        if (releasable_pods[n] == 0 || !Accepts(s.nodes[n], ps)) continue;
        Resources need = req;
        if (req.gpu_share()) need[Resource::kGpu] = 0;
        room = need.FitsIn(releasable[n]) && (!req.gpu_share() || share_room[n]);
      }
    }
    if (!room) continue;

    ++out.applicable;
    bool acted = !r.preemptions.empty();
    for (const Admission& a : Admissions(r)) acted |= a.workload == id;
    for (const PendingDecision& p : r.pending)
      acted |= p.workload == id && p.reason == PendingReason::kWaitingForPreemption;
    if (!acted) {
      out.error = w.name + " in queue " + w.queue +
                  " is within quota and could reclaim, but nothing was done";
      return out;
    }
  }
  return out;
}

int reclaim_applicable = 0;  // workloads property e applied to, in the current case

std::string CheckReclaimDefault(const Snapshot& s, const CycleResult& r) {
  const ReclaimCheck c = CheckReclaim(s, r, EngineConfig{});
  reclaim_applicable += c.applicable;
  return c.error;
}

RC_GTEST_PROP(EngineProperty, ReclaimWithinOneCycle, ()) {
  reclaim_applicable = 0;
  CheckCycles(GenSnapshot, {CheckReclaimDefault});
  RC_TAG(reclaim_applicable > 0 ? "reclaim applies" : "reclaim does not apply");
}

// A generator aimed at property e: a few queues, borrowers holding most of the cluster, one
// queue below its quota with a single-pod workload waiting, and other work waiting elsewhere.
// With `shares`, running work and the waiting pod may hold or ask for shares of GPUs.
Snapshot GenReclaimSnapshot(bool shares) {
  SnapshotBuilder b;
  b.Now(kNow);
  const int nodes = Pick(1, 6);
  for (int i = 0; i < nodes; ++i) {
    auto n = b.Node("n" + std::to_string(i), OneOf<int>({4, 8, 8}));
    if (Chance(15)) n.Unhealthy({0});
    if (Chance(10)) n.Taint("dedicated", "infer");
    if (Chance(10)) n.Cpu(Pick(4, 16) * 1000);
  }
  const bool nested = Chance(40);
  if (nested) b.Queue("dept").Quota(Pick(0, 24));
  b.Queue("owner", nested ? "dept" : "").Quota(Pick(1, 16));
  b.Queue("borrower-1").Quota(Pick(0, 2));
  b.Queue("borrower-2", nested && Chance(50) ? "dept" : "").Quota(Pick(0, 2)).Lending(Pick(0, 2));
  b.Queue("other").Quota(Pick(0, 8));
  std::vector<NodeRoom> room = InitialRoom(b.snapshot());
  const std::vector<std::string> holders = {"borrower-1", "borrower-2", "borrower-1", "owner",
                                            "other"};
  if (shares)
    for (Node& n : b.snapshot().nodes)
      for (Gpu& g : n.gpus) g.memory_mib = 81920;
  GenRunning(b, room, 4, 16, &holders, shares);
  auto w = b.Workload("want", "owner");
  w.Priority(OneOf<int32_t>({0, 10, 50, 100}));
  if (shares && Chance(60)) {
    w.Shares(1, PickShareMilli(), PickShareMemory());
  } else {
    w.Pods(1, OneOf<int64_t>({1, 1, 2, 4, 8}));
  }
  if (Chance(20)) w.Cpu(Pick(1, 4) * 500);
  if (Chance(15)) w.Tolerate("dedicated");
  if (Chance(15)) w.Suspended();
  for (int i = Pick(0, 3); i > 0; --i)
    b.Workload("elsewhere-" + std::to_string(i), OneOf<std::string>({"other", "borrower-1"}))
        .Pods(Pick(1, 3), Pick(1, 8))
        .Priority(PickPriority());
  return b.snapshot();
}
Snapshot GenReclaimSnapshot() { return GenReclaimSnapshot(false); }
Snapshot GenShareReclaimSnapshot() { return GenReclaimSnapshot(true); }

RC_GTEST_PROP(EngineProperty, ReclaimWithinOneCycleTargeted, ()) {
  reclaim_applicable = 0;
  CheckCycles(GenReclaimSnapshot, {CheckReclaimDefault});
  RC_TAG(reclaim_applicable > 0 ? "reclaim applies" : "reclaim does not apply");
}

// Property e where shares reclaim and are reclaimed: a share fits in a whole GPU or in a
// victim's share of one GPU at least as large.
RC_GTEST_PROP(EngineProperty, SharesReclaimWithinOneCycle, ()) {
  reclaim_applicable = 0;
  CheckCycles(GenShareReclaimSnapshot, {CheckReclaimDefault});
  CheckCycles(GenShareSnapshot, {CheckReclaimDefault});
  RC_TAG(reclaim_applicable > 0 ? "reclaim applies" : "reclaim does not apply");
}

// --- f. Determinism: the same snapshot gives the same decisions.

std::string CheckDeterministic(const Snapshot& s, const CycleResult& first) {
  const CycleResult again = Engine().Schedule(s);
  if (!(first.binds == again.binds)) return "binds differ";
  if (!(first.resumes == again.resumes)) return "resumes differ";
  if (!(first.preemptions == again.preemptions)) return "preemptions differ";
  if (!(first.pending == again.pending)) return "pending decisions differ";
  return {};
}

RC_GTEST_PROP(EngineProperty, Deterministic, ()) { CheckCycles(GenSnapshot, {CheckDeterministic}); }

// --- g. Every waiting workload gets exactly one decision; running work none of these.

std::string CheckOneDecisionEach(const Snapshot& s, const CycleResult& r) {
  std::vector<int> binds(s.workloads.size(), 0), resumes(s.workloads.size(), 0),
      pending(s.workloads.size(), 0);
  for (const BindDecision& d : r.binds) ++binds.at(d.workload.index());
  for (const ResumeDecision& d : r.resumes) ++resumes.at(d.workload.index());
  for (const PendingDecision& d : r.pending) ++pending.at(d.workload.index());
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    const int total = binds[i] + resumes[i] + pending[i];
    if (Waits(w) && total != 1)
      return w.name + ": " + std::to_string(total) + " decisions for a waiting workload";
    if (!Waits(w) && total != 0) return w.name + ": running work got a bind, resume or pending";
    if (w.state == WorkloadState::kPending && resumes[i] != 0) return w.name + ": resumed";
    if (w.state == WorkloadState::kSuspended && binds[i] != 0) return w.name + ": bound";
  }
  return {};
}

// Queue positions: a pending workload of a valid leaf queue is numbered among its queue's
// pending workloads 1, 2, ... in queue order (priority, then submit time, then name); work that
// never entered a queue (bad spec, unknown, invalid or non-leaf queue, a gang whose last pods do
// not exist yet, a gang in bind backoff) has position 0. Every
// pending decision explains itself.
std::string CheckQueuePositions(const Snapshot& s, const CycleResult& r) {
  const QueueTree tree(s.queues);
  std::map<int32_t, std::vector<const PendingDecision*>> by_queue;
  for (const PendingDecision& p : r.pending) {
    const Workload& w = s.workloads[p.workload.index()];
    if (p.message().empty()) return w.name + ": pending without a message";
    const QueueId q = tree.Find(w.queue);
    const bool queued = ValidateWorkload(w).empty() && q.valid() && tree.valid(q) && tree.leaf(q) &&
                        w.awaited_pods == 0 && w.bind_retry_at <= s.now;
    if (!queued) {
      if (p.queue_position != 0) return w.name + ": position in no queue";
      continue;
    }
    by_queue[q.value].push_back(&p);
  }
  for (auto& [q, list] : by_queue) {
    std::sort(list.begin(), list.end(), [&](const PendingDecision* a, const PendingDecision* b) {
      const Workload& x = s.workloads[a->workload.index()];
      const Workload& y = s.workloads[b->workload.index()];
      return std::tuple(-x.priority, x.submit_time, x.name, a->workload) <
             std::tuple(-y.priority, y.submit_time, y.name, b->workload);
    });
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i]->queue_position != static_cast<int32_t>(i + 1))
        return s.workloads[list[i]->workload.index()].name + ": queue position " +
               std::to_string(list[i]->queue_position) + ", expected " + std::to_string(i + 1);
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, EveryWaitingWorkloadGetsOneDecision, ()) {
  CheckCycles(GenSnapshot, {CheckOneDecisionEach, CheckQueuePositions});
}

// --- Several cycles in a row, each applying the last one's decisions: admitted work runs,
// victims spend one cycle preempting and are then suspended, some running work finishes. This
// reaches states the generators do not build directly (preemptors waiting on their victims,
// suspended victims coming back), and every cycle must pass every check above.

constexpr Check kAllChecks[] = {CheckNoDoubleBooking, CheckGangs,
                                CheckLimits,          CheckReservedSafe,
                                CheckVictimsEligible, CheckNoNeedlessPreemption,
                                CheckHardwareFaults,  CheckReservedWithinQuota,
                                CheckDeterministic,   CheckOneDecisionEach,
                                CheckQueuePositions,  CheckPreemptorKeepsItsRoom};

Snapshot NextSnapshot(const Snapshot& s, const CycleResult& r) {
  Snapshot next = s;
  next.now = s.now + Sec(60);
  for (Workload& w : next.workloads) {  // last cycle's victims are gone now
    if (w.state != WorkloadState::kPreempting) continue;
    w.state = WorkloadState::kSuspended;
    w.placements.clear();
  }
  auto start = [&](WorkloadId id, const std::vector<PodAssignment>& pods) {
    Workload& w = next.workloads[id.index()];
    w.state = WorkloadState::kRunning;
    w.start_time = s.now;
    w.placements.clear();
    for (const PodAssignment& a : pods) w.placements.push_back(a.placement);
  };
  for (const BindDecision& d : r.binds) start(d.workload, d.pods);
  for (const ResumeDecision& d : r.resumes) start(d.workload, d.pods);
  for (const PreemptDecision& d : r.preemptions) {
    Workload& w = next.workloads[d.workload.index()];
    w.state = WorkloadState::kPreempting;
    if (d.reason != PreemptReason::kHardwareFault) w.recent_preemptions.push_back(s.now);
  }
  std::vector<Workload> kept;
  for (Workload& w : next.workloads)
    if (!(w.state == WorkloadState::kRunning && Chance(10))) kept.push_back(std::move(w));
  next.workloads = std::move(kept);
  return next;
}

RC_GTEST_PROP(EngineProperty, SeveralCyclesInARow, ()) {
  Snapshot s = *rc::gen::inRange(0, 2) == 0 ? GenSnapshot() : GenReclaimSnapshot();
  const int cycles = Pick(2, 6);
  bool preempting_waiter = false;  // a cycle where a preemptor waits on victims in grace
  for (int c = 0; c < cycles; ++c) {
    const CycleResult r = Engine().Schedule(s);
    for (const PendingDecision& p : r.pending)
      preempting_waiter |= p.reason == PendingReason::kWaitingForPreemption && p.details().empty();
    for (Check check : kAllChecks) {
      const std::string error = check(s, r);
      if (!error.empty())
        RC_FAIL("cycle " + std::to_string(c) + ": " + error + "\n" + Dump(s) + DumpResult(s, r));
    }
    s = NextSnapshot(s, r);
  }
  RC_TAG(preempting_waiter ? "waits on victims in grace" : "no wait on victims in grace");
}

// All of the above on the reclaim-heavy snapshots too, which preempt far more often.
RC_GTEST_PROP(EngineProperty, AllPropertiesOnReclaimSnapshots, ()) {
  const int rounds = Pick(1, 30);  // small snapshots: many per case
  for (int i = 0; i < rounds; ++i) {
    const Snapshot s = GenReclaimSnapshot();
    const CycleResult r = Engine().Schedule(s);
    for (Check check : kAllChecks) {
      const std::string error = check(s, r);
      if (!error.empty()) RC_FAIL(error + "\n" + Dump(s) + DumpResult(s, r));
    }
  }
}

// --- Quotas per GPU model (docs/queues.md, "GPU models"): a leaf queue that lists GPU models is
// split into one queue per model before the cycle; every promise above then holds per model,
// and the work of a queue per model runs on GPUs of its model only.

// The GPU models some teams list, by team name, as given (before the split).
using DeclaredModels = std::map<std::string, std::vector<GpuModelQuota>>;

// Gives some leaf queues of `s` a list of GPU models (H100, A100, in either order, with their own
// quotas, limits, weights and lending limits; the queue's own GPU quota kept or made 0) and
// splits them, as every caller of the engine does. Returns the lists.
DeclaredModels ListGpuModels(Snapshot& s) {
  DeclaredModels declared;
  std::set<std::string> parents;
  for (const Queue& q : s.queues) parents.insert(q.parent);
  for (Queue& q : s.queues) {
    if (parents.contains(q.name) || !Chance(60)) continue;
    std::vector<std::string> models = {"H100", "A100"};
    if (Chance(50)) std::swap(models[0], models[1]);
    if (Chance(30)) models.pop_back();
    for (const std::string& m : models) {
      GpuModelQuota g{m, {}};
      g.gpu.quota = Gpus(Pick(0, 8));
      if (Chance(50)) g.gpu.limit = g.gpu.quota + Gpus(Pick(0, 8));
      if (Chance(20)) g.gpu.lending_limit = Gpus(Pick(0, 4));
      g.gpu.over_quota_weight = OneOf<double>({0.5, 1, 2});
      q.gpu_models.push_back(std::move(g));
    }
    if (Chance(50)) q.res(Resource::kGpu).quota = 0;  // the models' quotas add up to the queue's
    declared.emplace(q.name, q.gpu_models);
  }
  SplitGpuModelQueues(s);
  return declared;
}

// Against the lists as declared: every pod that asks for GPUs of a queue per model's admitted
// work is on a node of that model, and no model's admissions take its GPUs beyond its declared
// limit, counted after the cycle's victims leave.
std::string CheckModelQueues(const DeclaredModels& declared, const Snapshot& s,
                             const CycleResult& r) {
  std::map<std::string, int64_t> after, added;  // per queue per model
  std::set<int32_t> victims;
  for (const PreemptDecision& p : r.preemptions) victims.insert(p.workload.value);
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    if (w.state == WorkloadState::kRunning && !victims.contains(static_cast<int32_t>(i)))
      after[w.queue] += w.RequestOfFirst(static_cast<int32_t>(w.placements.size())).gpu_milli();
  }
  for (const Admission& a : Admissions(r)) {
    const Workload& w = s.workloads[a.workload.index()];
    const std::string_view owner = GpuModelQueueOwner(w.queue);
    if (owner.size() == w.queue.size()) continue;
    const std::string model = w.queue.substr(owner.size() + 1);
    for (const PodAssignment& p : *a.pods) {
      if (w.pod_sets[static_cast<size_t>(p.pod_set)].request.gpu_milli() == 0) continue;
      const Node& n = s.nodes[p.placement.node.index()];
      const std::string on = n.gpus.empty() ? std::string("no GPUs") : std::string(n.gpus[0].model);
      if (on != model)
        return w.name + " of queue " + w.queue + ": a pod placed on node " + n.name + " of " + on;
    }
    const int64_t gpus = AdmittedRequest(w, a).gpu_milli();
    after[w.queue] += gpus;
    added[w.queue] += gpus;
  }
  for (const auto& [team, models] : declared) {
    for (const GpuModelQuota& m : models) {
      const std::string queue = team + "/" + m.model;
      if (m.gpu.limit == kUnlimited || added[queue] == 0 || after[queue] <= m.gpu.limit) continue;
      return "queue " + queue + ": " + FormatQuantity(Resource::kGpu, after[queue]) +
             " after the cycle, its model's limit " + FormatQuantity(Resource::kGpu, m.gpu.limit);
    }
  }
  return {};
}

RC_GTEST_PROP(EngineProperty, GpuModelQueuesKeepEveryPromise, ()) {
  bool admitted = false, preempted = false;
  const int rounds = Pick(1, 12);
  for (int i = 0; i < rounds; ++i) {
    Snapshot s = Chance(50) ? GenSnapshot() : GenReclaimSnapshot();
    const DeclaredModels declared = ListGpuModels(s);
    const CycleResult r = Engine().Schedule(s);
    for (Check check : kAllChecks)
      if (const std::string error = check(s, r); !error.empty())
        RC_FAIL(error + "\n" + Dump(s) + DumpResult(s, r));
    if (const std::string error = CheckModelQueues(declared, s, r); !error.empty())
      RC_FAIL(error + "\n" + Dump(s) + DumpResult(s, r));
    for (const Admission& a : Admissions(r))
      admitted |= s.workloads[a.workload.index()].queue.find('/') != std::string::npos;
    for (const PreemptDecision& p : r.preemptions)
      preempted |= s.workloads[p.workload.index()].queue.find('/') != std::string::npos;
  }
  RC_CLASSIFY(admitted, "work of a queue per model admitted");
  RC_CLASSIFY(preempted, "work of a queue per model preempted");
}

// Promise 10 on both kinds of snapshot: the reclaim-heavy ones preempt with free room beside the
// victims; the others hold work in its grace period that waiting preemptors count on.
RC_GTEST_PROP(EngineProperty, PreemptorKeepsItsRoom, ()) {
  CheckCycles(GenReclaimSnapshot, {CheckPreemptorKeepsItsRoom});
  CheckCycles(GenSnapshot, {CheckPreemptorKeepsItsRoom});
}

// --- Shares of GPUs (docs/sharing.md, "In the engine"), on snapshots that mix them with whole
// GPUs: no GPU over-committed (a), gangs of shares whole (b), limits charged in GPU-equivalents
// (c), a share's victims where it goes (d), and every other check that applies to them, one
// cycle and several in a row.
//
// (d) A preemptor of one pod asking for a share, within its limits, whose victims come from one
// queue, takes them only where it is nominated: each holds a pod on that node, and when the
// preemptor asks for no CPU or memory and the node never ran short of pod slots, a share of its
// GPU or that GPU whole. And none of them can be spared: with the victim's shares on that GPU
// staying, the shares that stay there (those admitted and nominated in the cycle included, and
// those of other preemptors' victims, whose room is their preemptor's) leave it no room.

// The workloads `preemptor` preempts by policy in the cycle, and their queues.
std::vector<const Workload*> PolicyVictimsOf(const Snapshot& s, const CycleResult& r,
                                             WorkloadId preemptor) {
  std::vector<const Workload*> victims;
  for (const PreemptDecision& p : r.preemptions)
    if (p.preemptor == preemptor && p.reason != PreemptReason::kHardwareFault)
      victims.push_back(&s.workloads[p.workload.index()]);
  return victims;
}
std::set<std::string> QueuesOf(const std::vector<const Workload*>& workloads) {
  std::set<std::string> queues;
  for (const Workload* w : workloads) queues.insert(w->queue);
  return queues;
}

// Pod slots each node's pods take at most during the cycle: of every holder, leaving or not,
// and of every admission and nomination.
std::vector<int64_t> PodsAtMost(const Snapshot& s, const CycleResult& r) {
  std::vector<int64_t> pods(s.nodes.size(), 0);
  for (const Workload& w : s.workloads)
    if (Holds(w))
      for (const PodPlacement& p : w.placements) ++pods[p.node.index()];
  for (const Admission& a : Admissions(r))
    for (const PodAssignment& p : *a.pods) ++pods[p.placement.node.index()];
  for (const NominationDecision& d : r.nominations)
    for (const PodAssignment& p : d.pods) ++pods[p.placement.node.index()];
  return pods;
}

std::string CheckShareVictimsWhereItGoes(const Snapshot& s, const CycleResult& r) {
  const LimitBound limits(s, r);
  // Room any preemptor may count on: work in its grace period and work on failed GPUs. The room
  // of a policy preemption's victims is their preemptor's alone.
  std::set<int32_t> leaving = HardwareFaulted(r);
  for (size_t i = 0; i < s.workloads.size(); ++i)
    if (s.workloads[i].state == WorkloadState::kPreempting) leaving.insert(static_cast<int32_t>(i));
  using Gpu = std::pair<size_t, int>;
  struct Held {
    int64_t milli = 0;
    int64_t memory_mib = 0;
  };
  std::map<Gpu, Held> staying;  // shares that stay, per GPU
  auto add = [&](size_t n, uint64_t gpu, const PodSet& ps, bool stays) {
    if (!stays) return;
    Held& h = staying[{n, std::countr_zero(gpu)}];
    h.milli += ps.request.gpu_milli();
    h.memory_mib += ps.gpu_memory_mib;
  };
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    if (!Holds(w)) continue;
    for (size_t k = 0; k < w.placements.size(); ++k)
      if (const PodSet* ps = w.PlacementPodSet(k); ps != nullptr && ps->request.gpu_share())
        add(w.placements[k].node.index(), w.placements[k].gpu_mask, *ps,
            !leaving.contains(static_cast<int32_t>(i)));
  }
  for (const Admission& a : Admissions(r)) {
    const Workload& w = s.workloads[a.workload.index()];
    for (const PodAssignment& p : *a.pods) {
      const PodSet& ps = w.pod_sets[static_cast<size_t>(p.pod_set)];
      if (!ps.request.gpu_share()) continue;
      add(p.placement.node.index(), p.placement.gpu_mask, ps, true);
    }
  }
  for (const NominationDecision& d : r.nominations) {
    const Workload& w = s.workloads[d.workload.index()];
    for (const PodAssignment& p : d.pods)
      if (const PodSet& ps = w.pod_sets[static_cast<size_t>(p.pod_set)]; ps.request.gpu_share())
        add(p.placement.node.index(), p.placement.gpu_mask, ps, true);
  }
  // Within its limit, pod slots never made a victim needed.
  const std::vector<int64_t> pods_at_most = PodsAtMost(s, r);
  for (const NominationDecision& held : r.nominations) {
    const Workload& w = s.workloads[held.workload.index()];
    if (w.TotalPods() != 1 || !w.AsksForShares() || held.pods.size() != 1 || limits.MayBeAtLimit(w))
      continue;
    const PodPlacement& at = held.pods.front().placement;
    const Resources& req = w.pod_sets.front().request;
    const bool gpu_only = req.cpu_milli() == 0 && req.memory_bytes() == 0 &&
                          pods_at_most[at.node.index()] <= s.nodes[at.node.index()].max_pods;
    // Victims of one queue: sparing one keeps every fairness rule the set kept. Victims of
    // several may be needed for a rule rather than for room (one from the preemptor's own side
    // of the tree lowers that side's share, so that taking another flips nothing).
    const std::vector<const Workload*> victims = PolicyVictimsOf(s, r, held.workload);
    if (QueuesOf(victims).size() != 1) continue;
    for (const Workload* v : victims) {
      bool there = false;
      for (const PodPlacement& vp : v->placements)
        there |= vp.node == at.node && (!gpu_only || (vp.gpu_mask & at.gpu_mask) != 0);
      if (!there)
        return w.name + ": victim " + v->name + " holds nothing " +
               (gpu_only ? "on the GPU" : "on the node") + " its share is nominated to";
    }
    // Sparing a victim.
    const Gpu gpu{at.node.index(), std::countr_zero(at.gpu_mask)};
    const Held& h = staying[gpu];
    if (victims.size() < 2 || !gpu_only) continue;
    const PodSet& ps = w.pod_sets.front();
    const int64_t gpu_memory = s.nodes[gpu.first].gpus[static_cast<size_t>(gpu.second)].memory_mib;
    // What a victim holds of the GPU: its shares' compute and memory, or the GPU whole.
    struct OnGpu {
      int64_t milli = 0;
      int64_t memory_mib = 0;
      bool whole = false;
    };
    auto on_gpu = [&](const Workload& v) {
      OnGpu o;
      for (size_t k = 0; k < v.placements.size(); ++k) {
        const PodPlacement& vp = v.placements[k];
        if (vp.node.index() != gpu.first || ((vp.gpu_mask >> gpu.second) & 1) == 0) continue;
        const PodSet* vps = v.PlacementPodSet(k);
        if (vps == nullptr || !vps->request.gpu_share()) {
          o.whole = true;
          continue;
        }
        o.milli += vps->request.gpu_milli();
        o.memory_mib += vps->gpu_memory_mib;
      }
      return o;
    };
    // The shares that stay once every victim is gone, the preemptor's own included.
    int64_t base_milli = h.milli, base_memory = h.memory_mib;
    for (const Workload* v : victims) {
      const OnGpu o = on_gpu(*v);
      base_milli -= o.milli;
      base_memory -= o.memory_mib;
    }
    for (const Workload* v : victims) {
      const OnGpu o = on_gpu(*v);
      const bool whole = o.whole;
      const int64_t milli = base_milli + o.milli, memory = base_memory + o.memory_mib;
      if (!whole && milli <= kMilliPerGpu && (ps.gpu_memory_mib == 0 || memory <= gpu_memory))
        return w.name + ": victim " + v->name + " was not needed: its GPU has room for the " +
               "share beside it";
    }
  }
  return {};
}

// CheckCycles on share snapshots, classifying the cases by whether shares were bound beside
// other shares, so that a run shows the properties met that case.
void CheckShareCycles(std::initializer_list<Check> checks) {
  bool beside = false, share_preempts = false, share_preempted = false;
  CheckCycles(GenShareSnapshot, checks, [&](const Snapshot& s, const CycleResult& r) {
    std::map<std::pair<int32_t, uint64_t>, int> shares;
    for (const Admission& a : Admissions(r))
      for (const PodAssignment& p : *a.pods)
        if (s.workloads[a.workload.index()].pod_sets[p.pod_set].request.gpu_share())
          beside |= ++shares[{p.placement.node.value, p.placement.gpu_mask}] > 1;
    for (const PreemptDecision& p : r.preemptions) {
      if (p.reason == PreemptReason::kHardwareFault) continue;
      share_preempted |= s.workloads[p.workload.index()].AsksForShares();
      share_preempts |= s.workloads[p.preemptor.index()].AsksForShares();
    }
  });
  RC_CLASSIFY(beside, "shares bound beside each other");
  RC_CLASSIFY(share_preempts, "a share preempts");
  RC_CLASSIFY(share_preempted, "a share is preempted");
}

RC_GTEST_PROP(EngineProperty, SharesNeverOverCommitAGpu, ()) {
  CheckShareCycles({CheckNoDoubleBooking});
}

RC_GTEST_PROP(EngineProperty, GangsOfSharesStayWholeAndLimitsHold, ()) {
  CheckShareCycles({CheckGangs, CheckLimits});
}

// A generator aimed at preemption of and by shares: a few small nodes crowded with running shares
// and whole GPUs, often short of CPU or pod slots, and several waiting pods of high priority,
// most asking for shares, some with CPU: preemptors meet on the same GPUs, count on the same
// leaving room, and close GPUs to each other.
Snapshot GenSharePreemptionSnapshot() {
  SnapshotBuilder b;
  b.Now(kNow);
  const int nodes = Pick(1, 3);
  for (int i = 0; i < nodes; ++i) {
    auto n = b.Node("n" + std::to_string(i), OneOf<int>({1, 2, 4}));
    const int64_t memory = OneOf<int64_t>({24576, 81920, 81920});
    for (Gpu& g : n.get().gpus) g.memory_mib = memory;
    n.get().max_pods = OneOf<int>({4, 8, 32});
    if (Chance(40)) n.Cpu(Pick(2, 8) * 1000);
    // Its device plugin divides its GPUs: the shares already there stay, no new one goes there.
    n.get().device_plugin_shares = nodes > 1 && Chance(20);
  }
  GenQueues(b);
  // Some GPUs filled with small shares of random queues and priorities, some in their grace
  // period; then running work of every kind on what is left.
  int small = 0;
  for (size_t n = 0; n < b.snapshot().nodes.size(); ++n) {
    const Node& node = b.snapshot().nodes[n];
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      if (!Chance(50)) continue;
      int64_t used = 0;
      for (int64_t milli = OneOf<int64_t>({100, 200, 250, 300}); used + milli <= kMilliPerGpu;
           milli = OneOf<int64_t>({100, 200, 250, 300})) {
        auto w = b.Workload("small-" + std::to_string(small++), PickQueue(b.snapshot()));
        w.Shares(1, milli).Running(node.name, uint64_t{1} << g).Priority(PickPriority());
        w.Start(kNow - Sec(Pick(0, 7200)));
        if (Chance(10)) w.Preempting();
        used += milli;
        if (Chance(25)) break;
      }
    }
  }
  std::vector<NodeRoom> room = InitialRoom(b.snapshot());
  for (const Workload& w : b.snapshot().workloads) {
    const PodPlacement& p = w.placements.front();
    NodeRoom& r = room[p.node.index()];
    r.gpus &= ~p.gpu_mask;
    r.share_milli[static_cast<size_t>(std::countr_zero(p.gpu_mask))] +=
        w.TotalRequest().gpu_milli();
    r.pods -= 1;
  }
  GenRunning(b, room, 0, 12, nullptr, /*shares=*/true);
  for (int i = Pick(1, 6); i > 0; --i) {
    auto w = b.Workload("want-" + std::to_string(i), PickQueue(b.snapshot()));
    w.Priority(OneOf<int32_t>({10, 50, 100, 150}));
    // Large shares, which often need several small ones to leave.
    if (Chance(70)) {
      w.Shares(1, OneOf<int64_t>({500, 700, 900, 999}), PickShareMemory());
    } else {
      w.Pods(1, OneOf<int64_t>({1, 1, 2}));
    }
    if (Chance(30)) w.Cpu(Pick(1, 4) * 500);
  }
  return b.snapshot();
}

RC_GTEST_PROP(EngineProperty, SharePreemptionsKeepEveryPromise, ()) {
  bool share_preempts = false, several = false;
  const int rounds = Pick(1, 12);
  for (int i = 0; i < rounds; ++i) {
    const Snapshot s = GenSharePreemptionSnapshot();
    const CycleResult r = Engine().Schedule(s);
    for (Check check : kAllChecks)
      if (const std::string error = check(s, r); !error.empty())
        RC_FAIL(error + "\n" + Dump(s) + DumpResult(s, r));
    if (const std::string error = CheckShareVictimsWhereItGoes(s, r); !error.empty())
      RC_FAIL(error + "\n" + Dump(s) + DumpResult(s, r));
    std::map<int32_t, int> victims;
    for (const PreemptDecision& p : r.preemptions)
      if (p.reason != PreemptReason::kHardwareFault &&
          s.workloads[p.preemptor.index()].AsksForShares()) {
        share_preempts = true;
        several |= ++victims[p.preemptor.value] > 1;
      }
  }
  RC_CLASSIFY(share_preempts, "a share preempts");
  RC_CLASSIFY(several, "a share takes several victims");
}

RC_GTEST_PROP(EngineProperty, ASharesVictimsAreWhereItGoes, ()) {
  CheckShareCycles({CheckShareVictimsWhereItGoes, CheckNoNeedlessPreemption,
                    CheckPreemptorKeepsItsRoom, CheckVictimsEligible});
  CheckCycles(GenShareReclaimSnapshot, {CheckShareVictimsWhereItGoes, CheckNoNeedlessPreemption,
                                        CheckPreemptorKeepsItsRoom});
}

RC_GTEST_PROP(EngineProperty, SharesInSeveralCyclesInARow, ()) {
  Snapshot s = GenShareSnapshot();
  const int cycles = Pick(2, 6);
  int shares_bound = 0;
  for (int c = 0; c < cycles; ++c) {
    const CycleResult r = Engine().Schedule(s);
    for (const BindDecision& b : r.binds)
      shares_bound += s.workloads[b.workload.index()].AsksForShares() ? 1 : 0;
    for (Check check : kAllChecks) {
      const std::string error = check(s, r);
      if (!error.empty())
        RC_FAIL("cycle " + std::to_string(c) + ": " + error + "\n" + Dump(s) + DumpResult(s, r));
    }
    if (const std::string error = CheckShareVictimsWhereItGoes(s, r); !error.empty())
      RC_FAIL("cycle " + std::to_string(c) + ": " + error + "\n" + Dump(s) + DumpResult(s, r));
    s = NextSnapshot(s, r);
  }
  RC_CLASSIFY(shares_bound > 0, "shares bound");
}

// --- MIG devices (docs/sharing.md, "MIG devices in the engine"), on snapshots that mix them with
// whole GPUs: every check above, one cycle and several in a row, and these.
//
// (a) No node's devices of a profile are over-committed: a MIG pod is admitted only to a node
// advertising its profile and holds none of the node's GPUs; per node and profile, the devices
// that stay held (running work that is neither in its grace period nor preempted in the cycle),
// those admitted and those nominated to preemptors add up to at most what the node advertises.
// (b) A single MIG pod's victims, within its limits, of one queue, asking no CPU or memory on a
// node that never ran short of pod slots, each hold a device of its profile on the node it is
// nominated to, and none could be spared: with that victim staying, the node's devices of the
// profile would be over-committed (the devices of other preemptors' victims counting as held:
// their room is their preemptor's).

std::string CheckMigDevices(const Snapshot& s, const CycleResult& r) {
  std::set<int32_t> leaving;
  for (const PreemptDecision& p : r.preemptions) leaving.insert(p.workload.value);
  for (size_t i = 0; i < s.workloads.size(); ++i)
    if (s.workloads[i].state == WorkloadState::kPreempting) leaving.insert(static_cast<int32_t>(i));
  using Devices = std::pair<size_t, int>;  // node, profile
  std::map<Devices, int> used;
  // The devices of `ps` a pod holds.
  auto devices = [](const PodSet* ps) {
    return ps != nullptr && ps->mig.any() ? ps->mig.devices : 0;
  };
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    if (!Holds(w) || leaving.contains(static_cast<int32_t>(i))) continue;
    for (size_t k = 0; k < w.placements.size(); ++k)
      if (const PodSet* ps = w.PlacementPodSet(k); devices(ps) > 0)
        used[{w.placements[k].node.index(), ps->mig.profile}] += ps->mig.devices;
  }
  auto add = [&](const Workload& w, const std::vector<PodAssignment>& pods,
                 const char* how) -> std::string {
    for (const PodAssignment& p : pods) {
      const PodSet& ps = w.pod_sets[static_cast<size_t>(p.pod_set)];
      if (!ps.mig.any()) continue;
      const size_t n = p.placement.node.index();
      const Node& node = s.nodes[n];
      if (p.placement.gpu_mask != 0)
        return w.name + ": " + how + " MIG pod holds GPUs of node " + node.name;
      const int advertised = node.mig_devices[static_cast<size_t>(ps.mig.profile)];
      const int now = used[{n, ps.mig.profile}] += ps.mig.devices;
      if (now > advertised)
        return w.name + ": " + how + " on node " + node.name + ", whose " +
               std::to_string(advertised) + " MIG " +
               s.mig_profiles[static_cast<size_t>(ps.mig.profile)].name + " devices would hold " +
               std::to_string(now);
    }
    return {};
  };
  for (const Admission& a : Admissions(r))
    if (std::string e = add(s.workloads[a.workload.index()], *a.pods, "admitted"); !e.empty())
      return e;
  for (const NominationDecision& d : r.nominations)
    if (std::string e = add(s.workloads[d.workload.index()], d.pods, "nominated"); !e.empty())
      return e;

  // The devices each preemptor's victims hold, per node and profile.
  std::map<int32_t, std::map<Devices, int>> victims_hold;
  std::map<Devices, int> all_victims_hold;
  for (const PreemptDecision& p : r.preemptions) {
    if (p.reason == PreemptReason::kHardwareFault) continue;
    const Workload& v = s.workloads[p.workload.index()];
    for (size_t k = 0; k < v.placements.size(); ++k)
      if (const PodSet* vps = v.PlacementPodSet(k); devices(vps) > 0) {
        const Devices at{v.placements[k].node.index(), vps->mig.profile};
        victims_hold[p.preemptor.value][at] += vps->mig.devices;
        all_victims_hold[at] += vps->mig.devices;
      }
  }
  const LimitBound limits(s, r);
  const std::vector<int64_t> pods_at_most = PodsAtMost(s, r);
  for (const NominationDecision& held : r.nominations) {
    const Workload& w = s.workloads[held.workload.index()];
    const PodSet& ps = w.pod_sets.front();
    if (w.TotalPods() != 1 || !ps.mig.any() || held.pods.size() != 1 || limits.MayBeAtLimit(w) ||
        ps.request.cpu_milli() != 0 || ps.request.memory_bytes() != 0)
      continue;
    const size_t n = held.pods.front().placement.node.index();
    if (pods_at_most[n] > s.nodes[n].max_pods) continue;
    const std::vector<const Workload*> victims = PolicyVictimsOf(s, r, held.workload);
    if (QueuesOf(victims).size() != 1) continue;
    const int advertised = s.nodes[n].mig_devices[static_cast<size_t>(ps.mig.profile)];
    const Devices at{n, ps.mig.profile};
    const int others = all_victims_hold[at] - victims_hold[held.workload.value][at];
    for (const Workload* v : victims) {
      int held_there = 0;
      for (size_t k = 0; k < v->placements.size(); ++k)
        if (const PodSet* vps = v->PlacementPodSet(k); v->placements[k].node.index() == n &&
                                                       devices(vps) > 0 &&
                                                       vps->mig.profile == ps.mig.profile)
          held_there += vps->mig.devices;
      if (held_there == 0)
        return w.name + ": victim " + v->name + " holds no MIG device of its profile on node " +
               s.nodes[n].name;
      if (used[at] + others + held_there <= advertised)
        return w.name + ": victim " + v->name + " was not needed: node " + s.nodes[n].name +
               " has a device of its profile without it";
    }
  }
  return {};
}

void CheckMigCycles(Snapshot (*generate)(), std::initializer_list<Check> checks) {
  bool mig_bound = false, mig_preempts = false, mig_preempted = false;
  CheckCycles(generate, checks, [&](const Snapshot& s, const CycleResult& r) {
    auto asks_mig = [&](WorkloadId id) {
      for (const PodSet& ps : s.workloads[id.index()].pod_sets)
        if (ps.mig.any()) return true;
      return false;
    };
    for (const Admission& a : Admissions(r)) mig_bound |= asks_mig(a.workload);
    for (const PreemptDecision& p : r.preemptions) {
      if (p.reason == PreemptReason::kHardwareFault) continue;
      mig_preempts |= asks_mig(p.preemptor);
      mig_preempted |= asks_mig(p.workload);
    }
  });
  RC_CLASSIFY(mig_bound, "MIG pods bound");
  RC_CLASSIFY(mig_preempts, "a MIG pod preempts");
  RC_CLASSIFY(mig_preempted, "a MIG pod is preempted");
}

// A generator aimed at preemption of and by MIG pods: one to three nodes whose devices are all
// held by MIG pods of random queues and priorities (some in their grace period), and waiting MIG
// pods of high priority.
Snapshot GenMigPreemptionSnapshot() {
  SnapshotBuilder b;
  b.Now(kNow);
  const int nodes = Pick(1, 3);
  for (int i = 0; i < nodes; ++i) {
    auto n = b.Node("n" + std::to_string(i), OneOf<int>({0, 0, 1, 2}));
    n.Mig("1g.10gb", Pick(0, 4)).Mig("3g.40gb", Pick(0, 2)).MaxPods(OneOf<int>({4, 8, 32}));
  }
  GenQueues(b);
  int k = 0;
  for (size_t n = 0; n < b.snapshot().nodes.size(); ++n) {
    const Node& node = b.snapshot().nodes[n];
    for (int p = 0; p < 2; ++p) {
      for (int d = 0; d < node.mig_devices[static_cast<size_t>(p)]; ++d) {
        if (Chance(20)) continue;
        auto w = b.Workload("held-" + std::to_string(k++), PickQueue(b.snapshot()));
        w.Mig(1, MigProfileNames()[static_cast<size_t>(p)]).Running(node.name, 0);
        w.Priority(PickPriority()).Start(kNow - Sec(Pick(0, 7200)));
        if (Chance(10)) w.Preempting();
      }
    }
  }
  for (int i = Pick(1, 6); i > 0; --i) {
    auto w = b.Workload("want-" + std::to_string(i), PickQueue(b.snapshot()));
    w.Priority(OneOf<int32_t>({10, 50, 100, 150}));
    if (Chance(80)) {
      w.Mig(1, Chance(70) ? "1g.10gb" : "3g.40gb", Chance(20) ? 2 : 1);
    } else {
      w.Pods(1, 1);
    }
    if (Chance(20)) w.Cpu(Pick(1, 4) * 500);
  }
  return b.snapshot();
}

RC_GTEST_PROP(EngineProperty, MigDevicesNeverOverCommitted, ()) {
  CheckMigCycles(GenMigSnapshot, {CheckNoDoubleBooking, CheckMigDevices});
}

RC_GTEST_PROP(EngineProperty, MigGangsStayWholeAndLimitsChargeSlices, ()) {
  CheckMigCycles(GenMigSnapshot, {CheckGangs, CheckLimits, CheckReservedWithinQuota});
}

RC_GTEST_PROP(EngineProperty, MigPreemptionsKeepEveryPromise, ()) {
  const int rounds = Pick(1, 12);
  bool several = false;
  for (int i = 0; i < rounds; ++i) {
    const Snapshot s = Chance(50) ? GenMigPreemptionSnapshot() : GenMigSnapshot();
    const CycleResult r = Engine().Schedule(s);
    for (Check check : kAllChecks)
      if (const std::string error = check(s, r); !error.empty())
        RC_FAIL(error + "\n" + Dump(s) + DumpResult(s, r));
    if (const std::string error = CheckMigDevices(s, r); !error.empty())
      RC_FAIL(error + "\n" + Dump(s) + DumpResult(s, r));
    std::map<int32_t, int> victims;
    for (const PreemptDecision& p : r.preemptions)
      if (p.reason != PreemptReason::kHardwareFault) several |= ++victims[p.preemptor.value] > 1;
  }
  RC_CLASSIFY(several, "a preemptor takes several victims");
}

RC_GTEST_PROP(EngineProperty, MigInSeveralCyclesInARow, ()) {
  Snapshot s = Chance(50) ? GenMigPreemptionSnapshot() : GenMigSnapshot();
  const int cycles = Pick(2, 6);
  for (int c = 0; c < cycles; ++c) {
    const CycleResult r = Engine().Schedule(s);
    for (Check check : kAllChecks)
      if (const std::string error = check(s, r); !error.empty())
        RC_FAIL("cycle " + std::to_string(c) + ": " + error + "\n" + Dump(s) + DumpResult(s, r));
    if (const std::string error = CheckMigDevices(s, r); !error.empty())
      RC_FAIL("cycle " + std::to_string(c) + ": " + error + "\n" + Dump(s) + DumpResult(s, r));
    s = NextSnapshot(s, r);
  }
}

// --- The victim index is a way of computing, not of deciding: with it or without, one cycle
// decides the same.

std::string SameDecisions(const CycleResult& a, const CycleResult& b) {
  if (!(a.binds == b.binds)) return "binds differ";
  if (!(a.resumes == b.resumes)) return "resumes differ";
  if (!(a.preemptions == b.preemptions)) return "preemptions differ";
  if (!(a.pending == b.pending)) return "pending decisions differ";
  return {};
}

// A reclaim cycle with many searches: a small synthetic fleet in churn (lenders want their quota
// back from borrowers), varied in what the index must get right: waiting pods of several GPUs
// (several victims a node), reserved waiting work (victims by priority in its own queue beside
// those of reclaim), pinned GPU models, failed GPUs and cordoned nodes, young and often
// preempted running work, and the preemption switches.
RC_GTEST_PROP(EngineProperty, VictimIndexDecidesAsTheScan, ()) {
  SyntheticSpec spec;
  spec.nodes = Pick(2, 48);
  spec.gpus_per_node = OneOf<int32_t>({4, 8, 8});
  spec.nodes_per_block = OneOf<int32_t>({4, 8, 32});
  spec.nvlink_domain_nodes = OneOf<int32_t>({0, 0, 2});
  spec.queues = Pick(2, 12);
  spec.teams_per_department = Pick(1, 4);
  spec.gpus_per_pod = OneOf<int32_t>({1, 1, 2});
  spec.pods = spec.nodes * spec.gpus_per_node * Pick(12, 20) / 10 / spec.gpus_per_pod;
  spec.running_fraction = 0.8;
  spec.pinned_model_fraction = OneOf<double>({0, 0.2, 0.6});
  spec.churn = true;
  // Waiting shares, and with single pods of one GPU running shares too (SyntheticSpec::shares).
  spec.shares = Chance(40);
  if (spec.shares) spec.gpus_per_pod = 1;
  spec.seed = static_cast<uint64_t>(Pick(1, 1 << 20));
  RC_PRE(ValidateSyntheticSpec(spec).empty());
  Snapshot s = MakeSyntheticCluster(spec);
  for (Workload& w : s.workloads) {
    const bool waits = w.state == WorkloadState::kPending;
    if (waits && !w.AsksForShares() && Chance(20))
      w.pod_sets[0].request[Resource::kGpu] *= Pick(2, 3);
    if (!waits && Chance(10)) w.start_time = s.now - Sec(Pick(0, 120));
    if (!waits && Chance(10)) w.recent_preemptions.assign(3, s.now - Sec(Pick(0, 7200)));
  }
  for (Node& n : s.nodes) {
    if (Chance(5)) n.unschedulable = true;
    if (Chance(5)) n.gpus[0].healthy = false;
  }
  EngineConfig cfg;
  cfg.priority_preemption_enabled = !Chance(20);
  cfg.reclaim_enabled = !Chance(10);
  const Engine scan(cfg, DefaultPolicies(), EngineTuning{.victim_index_after = 0});
  const Engine indexed(cfg, DefaultPolicies(), EngineTuning{.victim_index_after = Pick(1, 3)});
  const CycleResult a = scan.Schedule(s);
  const CycleResult b = indexed.Schedule(s);
  RC_ASSERT(a.stats.indexed_preemption_searches == 0);
  RC_CLASSIFY(b.stats.indexed_preemption_searches > 0, "index used");
  RC_CLASSIFY(b.stats.indexed_preemption_searches > 50, "index used for over 50 searches");
  bool share_preempts = false;
  for (const PreemptDecision& p : b.preemptions)
    share_preempts |= p.preemptor.valid() && s.workloads[p.preemptor.index()].AsksForShares();
  RC_CLASSIFY(share_preempts, "a share preempts");
  const std::string error = SameDecisions(a, b);
  if (!error.empty())
    RC_FAIL(error + "\n" + DumpResult(s, a) + "with the index:\n" + DumpResult(s, b));
}

// --- A node index kept from cycle to cycle is a way of computing too: cycles in a row given the
// index built for the first one's nodes decide as cycles that derive it afresh, and an index of
// another number of nodes is ignored.

std::string SameIssues(const CycleResult& a, const CycleResult& b) {
  if (a.issues.size() != b.issues.size()) return "issues differ in number";
  for (size_t i = 0; i < a.issues.size(); ++i)
    if (a.issues[i].object != b.issues[i].object || a.issues[i].message != b.issues[i].message)
      return "issue " + std::to_string(i) + " differs";
  return {};
}

// --- A session keeps what cycles derive from the snapshot and reloads what changed: over random
// changes made through it (decisions applied, grace periods ending, work finishing and
// arriving, priorities, queues and checkpoints changing, nodes failing, the queue tree edited,
// now and then a placement that cannot be recorded), each cycle decides and reports exactly as a
// fresh cycle over the session's snapshot, explained or not.

std::string SameReport(const CycleResult& a, const CycleResult& b) {
  std::string error = SameDecisions(a, b);
  if (error.empty()) error = SameIssues(a, b);
  if (!error.empty()) return error;
  if (a.queues.size() != b.queues.size()) return "queue statuses differ in number";
  for (size_t i = 0; i < a.queues.size(); ++i) {
    const QueueStatus& x = a.queues[i];
    const QueueStatus& y = b.queues[i];
    if (x.name != y.name || !(x.allocated == y.allocated) || x.fair_share != y.fair_share ||
        !(x.borrowed == y.borrowed) || !(x.lent == y.lent) ||
        x.pending_workloads != y.pending_workloads || x.running_workloads != y.running_workloads ||
        x.error != y.error)
      return "status of queue " + x.name + " differs";
  }
  const CycleStats& x = a.stats;
  const CycleStats& y = b.stats;
  if (std::tie(x.workloads_considered, x.placement_attempts, x.placement_cache_hits,
               x.preemption_searches, x.indexed_preemption_searches, x.pending) !=
      std::tie(y.workloads_considered, y.placement_attempts, y.placement_cache_hits,
               y.preemption_searches, y.indexed_preemption_searches, y.pending))
    return "cycle stats differ";
  return {};
}

// Applies a cycle's decisions and some of what happens between cycles, through the session.
void ChangeThroughSession(EngineSession& session, const CycleResult& r, int* serial) {
  const Snapshot& s = session.snapshot();
  const Time now = s.now;
  // Last cycle's victims: some have left by now.
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    if (s.workloads[i].state != WorkloadState::kPreempting || !Chance(60)) continue;
    Workload& w = session.MutableWorkload(WorkloadId{static_cast<int32_t>(i)});
    w.state = WorkloadState::kSuspended;
    w.placements.clear();
  }
  auto start = [&](WorkloadId id, const std::vector<PodAssignment>& pods) {
    Workload& w = session.MutableWorkload(id);
    w.state = WorkloadState::kRunning;
    w.start_time = now;
    w.last_checkpoint_time.reset();
    w.placements.clear();
    for (const PodAssignment& a : pods) w.placements.push_back(a.placement);
  };
  for (const BindDecision& d : r.binds) {
    if (!Chance(10)) {
      start(d.workload, d.pods);
      continue;
    }
    // A bind may fail; the gang then mostly waits out a bind backoff (a session must place it
    // once the time has come, with nothing else about it changed).
    if (Chance(80)) {
      Workload& w = session.MutableWorkload(d.workload);
      w.bind_retry_at = now + Sec(OneOf<int>({1, 20, 45, 900}));
      ++w.bind_rollbacks;
      w.bind_failure = "a bind refused";
    }
  }
  for (const ResumeDecision& d : r.resumes) start(d.workload, d.pods);
  for (const PreemptDecision& d : r.preemptions) {
    Workload& w = session.MutableWorkload(d.workload);
    w.state = WorkloadState::kPreempting;
    if (d.reason != PreemptReason::kHardwareFault) w.recent_preemptions.push_back(now);
  }
  // Work finishes; the last workload takes the place of each removed one.
  for (size_t i = 0; i < session.snapshot().workloads.size(); ++i) {
    const Workload& w = session.snapshot().workloads[i];
    if (w.state == WorkloadState::kRunning && Chance(15))
      session.RemoveWorkload(WorkloadId{static_cast<int32_t>(i)});
  }
  // Waiting work changes priority or queue; running work passes a checkpoint.
  const std::vector<std::string> leaves = LeafQueueNames(session.snapshot());
  for (size_t i = 0; i < session.snapshot().workloads.size(); ++i) {
    const WorkloadId id{static_cast<int32_t>(i)};
    const Workload& w = session.snapshot().workloads[i];
    if (Waits(w) && Chance(10)) session.MutableWorkload(id).priority = PickPriority();
    if (Waits(w) && !leaves.empty() && Chance(5))
      session.MutableWorkload(id).queue = leaves[static_cast<size_t>(Pick(0, leaves.size() - 1))];
    if (w.state == WorkloadState::kRunning && Chance(10))
      session.MutableWorkload(id).last_checkpoint_time = now;
  }
  // Work arrives: copies of existing workloads, waiting, a few with the submit time of others.
  const int arrivals = Pick(0, 4);
  for (int k = 0; k < arrivals && !session.snapshot().workloads.empty(); ++k) {
    const auto& all = session.snapshot().workloads;
    Workload w = all[static_cast<size_t>(Pick(0, static_cast<int>(all.size()) - 1))];
    w.name = "arrival-" + std::to_string((*serial)++);
    w.state = Chance(80) ? WorkloadState::kPending : WorkloadState::kSuspended;
    w.placements.clear();
    w.priority = PickPriority();
    if (Chance(80)) w.submit_time = now;
    session.AddWorkload(std::move(w));
  }
  // Now and then: a placement that cannot be recorded (a GPU someone already holds).
  if (Chance(5)) {
    const auto& all = session.snapshot().workloads;
    for (const Workload& held : all) {
      if (held.state != WorkloadState::kRunning || held.placements.empty()) continue;
      Workload w = held;
      w.name = "conflict-" + std::to_string((*serial)++);
      w.placements.resize(1);
      w.pod_sets.resize(1);
      w.pod_sets[0].count = 1;
      w.min_member = 0;
      session.AddWorkload(std::move(w));
      break;
    }
  }
  // Rarely: a GPU fails or comes back, a node is cordoned, a quota changes.
  if (Chance(8) && !session.snapshot().nodes.empty()) {
    const auto n = static_cast<int32_t>(Pick(0, static_cast<int>(s.nodes.size()) - 1));
    Node& node = session.MutableNode(NodeId{n});
    if (!node.gpus.empty()) {
      Gpu& g = node.gpus[static_cast<size_t>(Pick(0, static_cast<int>(node.gpus.size()) - 1))];
      g.healthy = !g.healthy;
    } else {
      node.unschedulable = !node.unschedulable;
    }
  }
  if (Chance(5) && !session.snapshot().queues.empty()) {
    std::vector<Queue>& queues = session.MutableQueues();
    queues[static_cast<size_t>(Pick(0, static_cast<int>(queues.size()) - 1))]
        .res(Resource::kGpu)
        .quota = Gpus(Pick(0, 16));
  }
  session.SetNow(now + Sec(OneOf<int>({0, 30, 60, 600})));
}

RC_GTEST_PROP(EngineSessionProperty, DecidesAsAFreshCycle, ()) {
  // Snapshots with shares run the share tables of a kept ClusterState through its journal.
  const int kind = *rc::gen::inRange(0, 3);
  const Snapshot first = kind == 0   ? GenSnapshot()
                         : kind == 1 ? GenReclaimSnapshot()
                                     : GenShareSnapshot();
  EngineConfig cfg;
  if (Chance(30)) cfg.default_queueing = QueueingStrategy::kStrictFifo;
  if (Chance(20))
    cfg.queue_order = OneOf<QueueOrder>({QueueOrder::kDominantShare, QueueOrder::kOldestHead});
  cfg.priority_preemption_enabled = !Chance(20);
  const Engine engine(cfg, DefaultPolicies(), EngineTuning{.victim_index_after = Pick(0, 3)});
  EngineSession session(engine, first);
  const int cycles = Pick(2, 12);
  int serial = 0;
  int rebuilt_by_conflict = 0;
  for (int c = 0; c < cycles; ++c) {
    CycleOptions options;
    options.explain = !Chance(40);
    const Snapshot before = session.snapshot();
    const CycleResult kept = session.Schedule(options);
    const CycleResult fresh = engine.Schedule(session.snapshot(), options);
    const std::string error = SameReport(fresh, kept);
    if (!error.empty())
      RC_FAIL("cycle " + std::to_string(c) + ": " + error + "\n" + Dump(before) +
              DumpResult(before, fresh) + "the session's:\n" + DumpResult(before, kept));
    if (!options.explain) RC_ASSERT(kept.pending.empty() && kept.queues.empty());
    if (options.explain) RC_ASSERT(kept.stats.pending == static_cast<int32_t>(kept.pending.size()));
    rebuilt_by_conflict += kept.issues.empty() ? 0 : 1;
    ChangeThroughSession(session, kept, &serial);
  }
  RC_CLASSIFY(rebuilt_by_conflict > 0, "a cycle with snapshot issues");
}

}  // namespace
}  // namespace chamber::core
