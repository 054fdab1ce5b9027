// Helpers for the engine's property checks: what a snapshot holds and a result decides, read
// directly from the model, and dumps of both for failure messages.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/engine.h"
#include "core/queue_tree.h"
#include "core/test/generators.h"

namespace chamber::core::testing {

// --- Helpers for the checks. ---

// A queue's quota of a resource, or for a parent with none of it, its children's summed
// (docs/fairness.md): computed here apart from QueueTree::effective_quota.
inline int64_t EffectiveQuota(const QueueTree& tree, QueueId q, Resource res) {
  const int64_t own = tree.queue(q).res(res).quota;
  if (own != 0 || tree.leaf(q)) return own;
  int64_t sum = 0;
  for (QueueId c : tree.children(q)) sum += EffectiveQuota(tree, c, res);
  return sum;
}

// The workloads a cycle preempted for holding a failed GPU.
inline std::set<int32_t> HardwareFaulted(const CycleResult& r) {
  std::set<int32_t> out;
  for (const PreemptDecision& p : r.preemptions)
    if (p.reason == PreemptReason::kHardwareFault) out.insert(p.workload.value);
  return out;
}

inline bool Holds(const Workload& w) {
  return w.state == WorkloadState::kRunning || w.state == WorkloadState::kPreempting;
}
inline bool Waits(const Workload& w) {
  return w.state == WorkloadState::kPending || w.state == WorkloadState::kSuspended;
}

inline bool Tolerated(const Taint& t, const std::vector<Toleration>& tols) {
  if (t.effect == TaintEffect::kPreferNoSchedule) return true;
  for (const Toleration& tol : tols) {
    if (tol.effect && *tol.effect != t.effect) continue;
    if (tol.op == Toleration::Operator::kExists && (tol.key.empty() || tol.key == t.key))
      return true;
    if (tol.op == Toleration::Operator::kEqual && tol.key == t.key && tol.value == t.value)
      return true;
  }
  return false;
}

inline bool Schedulable(const Node& n) {
  return !n.unschedulable && n.gpus.size() <= static_cast<size_t>(kMaxGpusPerNode) &&
         !n.allocatable.AnyNegative() && n.max_pods >= 0;
}

// Whether a pod of `ps` may ever run on `n`: schedulable, selector, taints, GPU model.
inline bool Accepts(const Node& n, const PodSet& ps) {
  if (!Schedulable(n)) return false;
  for (const auto& kv : ps.node_selector) {
    const auto it = std::find_if(n.labels.begin(), n.labels.end(),
                                 [&](const auto& l) { return l.first == kv.first; });
    if (it == n.labels.end() || it->second != kv.second) return false;
  }
  for (const Taint& t : n.taints)
    if (!Tolerated(t, *ps.tolerations)) return false;
  if (!ps.gpu_models.empty() && ps.request.gpu_milli() > 0) {
    if (n.gpus.empty()) return false;
    if (std::find(ps.gpu_models.begin(), ps.gpu_models.end(), n.gpus.front().model) ==
        ps.gpu_models.end())
      return false;
  }
  // A node whose device plugin divides its GPUs takes no share of one.
  if (ps.request.gpu_share() && n.device_plugin_shares) return false;
  // MIG devices only where the node advertises the profile.
  if (ps.mig.any() && n.mig_devices[static_cast<size_t>(ps.mig.profile)] == 0) return false;
  return true;
}

// Binds and resumes alike: a workload and the pods placed for it.
struct Admission {
  WorkloadId workload;
  const std::vector<PodAssignment>* pods;
};
inline std::vector<Admission> Admissions(const CycleResult& r) {
  std::vector<Admission> out;
  for (const BindDecision& d : r.binds) out.push_back({d.workload, &d.pods});
  for (const ResumeDecision& d : r.resumes) out.push_back({d.workload, &d.pods});
  return out;
}

inline Resources AdmittedRequest(const Workload& w, const Admission& a) {
  Resources total;
  for (const PodAssignment& p : *a.pods)
    total += w.pod_sets[static_cast<size_t>(p.pod_set)].Charge();
  return total;
}

inline constexpr const char* kStateNames[] = {"pending", "running", "preempting", "suspended"};

inline std::string Dump(const Snapshot& s) {
  std::ostringstream o;
  o << "now " << s.now.count() / 1000 << "s\n";
  for (const Node& n : s.nodes) {
    o << "node " << n.name << " gpus " << n.gpus.size() << " healthy 0x" << std::hex
      << HealthyMask(n) << std::dec << " cpu " << n.allocatable.cpu_milli() << " memory "
      << n.allocatable.memory_bytes() / kGi << "Gi pods " << n.max_pods << " block "
      << n.topology.block
      << (n.gpus.empty() ? "" : " gpu-mem " + std::to_string(n.gpus[0].memory_mib))
      << (n.unschedulable ? " cordoned" : "") << (n.taints.empty() ? "" : " tainted");
    for (size_t p = 0; p < s.mig_profiles.size(); ++p)
      if (n.mig_devices[p] > 0) o << " mig#" << p << "=" << int{n.mig_devices[p]};
    o << "\n";
  }
  for (const Queue& q : s.queues) {
    const QueueResource& g = q.res(Resource::kGpu);
    o << "queue " << q.name << " parent '" << q.parent << "' quota " << g.quota << " limit "
      << g.limit << " lending " << g.lending_limit << " weight " << g.over_quota_weight << " prio "
      << q.priority << " cpu quota " << q.res(Resource::kCpu).quota << " limit "
      << q.res(Resource::kCpu).limit << " within-queue "
      << static_cast<int>(q.preemption.within_queue) << " reclaim "
      << static_cast<int>(q.preemption.reclaim) << " delay " << q.preemption.delay.count() / 1000
      << "s\n";
  }
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const Workload& w = s.workloads[i];
    o << "workload #" << i << " " << w.name << " queue " << w.queue << " prio " << w.priority << " "
      << kStateNames[static_cast<int>(w.state)] << " min " << w.min_member << " start "
      << w.start_time.count() / 1000;
    if (!w.recent_preemptions.empty()) {
      o << " preempted at";
      for (Time t : w.recent_preemptions) o << " " << t.count() / 1000 << "s";
    }
    o << " pods";
    for (const PodSet& ps : w.pod_sets) {
      o << " " << ps.count << "x" << FormatResources(ps.request);
      if (ps.mig.any()) o << "+" << int{ps.mig.devices} << "xMIG#" << int{ps.mig.profile};
      if (ps.gpu_memory_mib > 0) o << "+" << ps.gpu_memory_mib << "MiB";
    }
    for (const PodPlacement& p : w.placements)
      o << " @" << p.node.value << ":0x" << std::hex << p.gpu_mask << std::dec;
    o << "\n";
  }
  return o.str();
}

inline std::string DumpResult(const Snapshot& s, const CycleResult& r) {
  std::ostringstream o;
  for (const BindDecision& d : r.binds) {
    o << "bind " << s.workloads[d.workload.index()].name;
    for (const PodAssignment& p : d.pods)
      o << " @" << p.placement.node.value << ":0x" << std::hex << p.placement.gpu_mask << std::dec;
    o << "\n";
  }
  for (const ResumeDecision& d : r.resumes)
    o << "resume " << s.workloads[d.workload.index()].name << "\n";
  for (const PreemptDecision& d : r.preemptions)
    o << "preempt " << s.workloads[d.workload.index()].name << " " << PreemptReasonName(d.reason)
      << "\n";
  for (const NominationDecision& d : r.nominations) {
    o << "nominate " << s.workloads[d.workload.index()].name;
    for (const PodAssignment& p : d.pods)
      o << " @" << p.placement.node.value << ":0x" << std::hex << p.placement.gpu_mask << std::dec;
    o << "\n";
  }
  for (const PendingDecision& d : r.pending)
    o << "pending " << s.workloads[d.workload.index()].name << " " << PendingReasonName(d.reason)
      << ": " << d.message() << "\n";
  return o.str();
}

using Check = std::string (*)(const Snapshot&, const CycleResult&);

// Runs one cycle on a few generated snapshots (a count that shrinks to one, so the default 100
// cases cover several hundred snapshots) and applies `checks` to each result. A failing check
// fails the case with its message, the snapshot and the decisions. `seen`, when given, is shown
// each snapshot and result that passed (to classify the cases).
inline void CheckCycles(
    Snapshot (*generate)(), std::initializer_list<Check> checks,
    const std::function<void(const Snapshot&, const CycleResult&)>& seen = nullptr) {
  const int rounds = Pick(1, 12);
  for (int i = 0; i < rounds; ++i) {
    const Snapshot s = generate();
    const CycleResult r = Engine().Schedule(s);
    for (Check check : checks) {
      const std::string error = check(s, r);
      if (!error.empty()) RC_FAIL(error + "\n" + Dump(s) + DumpResult(s, r));
    }
    if (seen) seen(s, r);
  }
}

}  // namespace chamber::core::testing
