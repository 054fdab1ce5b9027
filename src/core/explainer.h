// Explainer: why waiting work waits, and each queue's status, once a cycle has decided.
//
// A workload that fits nowhere is NoNodeFits only when the cluster owes it room (it is within
// its queue's quota at every level) or when it would not fit even with every elastic running
// workload gone; otherwise a rule holds the room back, and it waits for FairShare or
// PreemptionNotAllowed with the rule and the queues named (docs/fairness.md, promise 9). The
// explainer settles that after the passes, when it knows what the cycle admitted, and then
// numbers each waiting workload's place in its queue, puts the pending decisions in workload
// order and fills the queues' status. Explanations are shared by every workload of one shape
// (and queue and pass), and asked for once.
//
// Engine internals: the cycle drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cluster_state.h"
#include "core/config.h"
#include "core/decision.h"
#include "core/engine.h"
#include "core/loaded_work.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/preemption_planner.h"
#include "core/queue_accounting.h"
#include "core/queue_tree.h"

namespace chamber::core {

class Explainer {
 public:
  // Each must outlive the explainer.
  Explainer(const Snapshot& s, const EngineConfig& cfg, const Policies& pol, const QueueTree& tree,
            const ClusterState& state, const FeasibilityCache& feasibility,
            const QueueAccounting& queues, const LoadedWork& work, PreemptionPlanner& planner);

  // Starts a cycle; EndCycle forgets what a kept cycle asked.
  void BeginCycle();
  void EndCycle();

  // Why the first `pods` pods of waiting workload `w` fit nowhere on free capacity.
  std::shared_ptr<const PendingExplanation> NoFit(WorkloadId w, int32_t pods);
  // `out->pending[index]` is NoNodeFits for `pods` pods of work beyond its quota, tried in
  // `pass`: Finish settles whether a rule holds it back.
  void SettleLater(size_t index, WorkloadId w, int32_t pods, int pass);

  // Settles the policy waits, then fills the pending decisions' queue positions, puts them in
  // workload order and fills the queues' status.
  void Finish(CycleResult* out);

 private:
  // Turns the NoNodeFits decisions of work beyond its quota that would fit without the elastic
  // running work into the rule's wait (PolicyWait).
  void SettlePolicyWaits(CycleResult* out);
  bool FitsWithoutElasticWork(WorkloadId w, int32_t shape, int32_t pods);
  // Why a workload that fits nowhere waits, when it would fit with all elastic running work
  // gone: which rule holds the room back (FairShare or PreemptionNotAllowed), per queue.
  const PendingWhy& PolicyWait(WorkloadId w, int32_t shape, int32_t pods, int pass);
  void FillQueueStatus(CycleResult* out) const;
  const Workload& wl(WorkloadId w) const { return s_.workloads[w.index()]; }

  const Snapshot& s_;
  const EngineConfig& cfg_;
  const Policies& pol_;
  const QueueTree& tree_;
  const ClusterState& state_;
  const FeasibilityCache& feas_;
  const QueueAccounting& queues_;
  const LoadedWork& work_;
  PreemptionPlanner& planner_;

  std::vector<int32_t> touched_shapes_;  // shapes with an entry below set this cycle
  // Per shape: why not, once asked; shared by every pending workload of the shape.
  std::vector<std::shared_ptr<const PendingExplanation>> no_fit_;
  std::vector<int8_t> fits_without_elastic_;  // per shape: -1 not asked, 0 no, 1 yes
  // The cluster with only reserved work holding room, while SettlePolicyWaits runs.
  std::optional<ClusterState> without_elastic_;
  std::vector<int32_t> elastic_in_;  // per queue: its elastic running workloads
  // NoNodeFits decisions of work beyond its quota: the decision, and the pods and pass it was
  // tried with.
  struct Unsettled {
    size_t index;   // in CycleResult::pending
    int32_t shape;  // of `pods` pods
    int32_t pods;
    int pass;
  };
  std::vector<Unsettled> unsettled_;
  // queue << 34 | pass << 32 | shape: the explanation of a policy wait, shared by its workloads.
  std::unordered_map<uint64_t, PendingWhy> policy_why_;
};

}  // namespace chamber::core
