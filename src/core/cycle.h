// Cycle: one scheduling cycle, the algorithm engine.h describes, over the parts that hold its
// state. Engine::Schedule builds one, loads every workload and runs it once; EngineSession keeps
// one between cycles.
//
// The parts, each the only owner of what it holds:
//   - LoadedWork (loaded_work.h): what the cycle derives from the snapshot's workloads;
//   - ClusterState (cluster_state.h): who holds which GPU, CPU and memory;
//   - QueueAccounting (queue_accounting.h): what each queue holds, and its fair share;
//   - QueueSorter and QueueTurns (queue_order.h): the order queues are served in;
//   - AdmissionChecks (admission.h): limits, reserved quota and lending limits;
//   - PreemptionPlanner (preemption_planner.h): candidates, the victim rules and the search;
//   - Explainer (explainer.h): why waiting work waits, and the queues' status.
// What is left here is the algorithm: the two passes, and for each waiting workload the checks,
// the placement on free capacity, the wait for capacity on its way back, and preemption.
//
// Engine internals: nothing outside engine.cc uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/admission.h"
#include "core/cluster_state.h"
#include "core/config.h"
#include "core/decision.h"
#include "core/engine.h"
#include "core/explainer.h"
#include "core/loaded_work.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/preemption_planner.h"
#include "core/queue_accounting.h"
#include "core/queue_order.h"
#include "core/queue_tree.h"

namespace chamber::core {

// The state of a cycle: what it derives from the snapshot's workloads (loaded), and what it
// decides. Engine::Schedule builds one, loads every workload and runs it once. A session keeps
// one between cycles (`keep`): it unloads a workload before the workload changes and loads it
// again after, and each Run drops what the cycle itself claimed, so the loaded part is always
// what loading the current snapshot afresh would give.
class Cycle {
 public:
  // `node_index` may be null, or what the snapshot's nodes derive (ClusterState).
  Cycle(const Snapshot& s, const EngineConfig& cfg, const Policies& pol, const EngineTuning& tune,
        bool keep, std::shared_ptr<const NodeIndex> node_index)
      : s_(s),
        cfg_(cfg),
        pol_(pol),
        keep_(keep),
        tree_(s.queues),
        state_(s, std::move(node_index)),
        feas_(state_, &s),
        queues_(tree_),
        work_(s, cfg, tree_, state_, feas_, queues_),
        admission_(tree_, queues_, state_),
        sorter_(MakeSorter(cfg, tree_, s, state_, queues_)),
        turns_(tree_, s.queues),
        planner_(s, cfg, pol, tune, tree_, state_, feas_, queues_, work_, sorter_),
        explainer_(s, cfg, pol, tree_, state_, feas_, queues_, work_, planner_) {}

  LoadedWork& work() { return work_; }

  CycleResult Run(const CycleOptions& options);

 private:
  const Workload& wl(WorkloadId w) const { return s_.workloads[w.index()]; }
  QueueingStrategy Strategy(QueueId q) const {
    return tree_.queue(q).queueing.value_or(cfg_.default_queueing);
  }

  // Per cycle: what the last one left, cleared; released capacity and hardware faults applied.
  void BeginRun();
  void EndRun();
  void ComputeFairShare();
  // One pass over `lists` (per leaf queue), in the order `sorter` gives the queues.
  template <typename Sorter>
  void Serve(const Sorter& sorter, const std::vector<std::vector<WorkloadId>>& lists, int pass,
             std::vector<std::vector<WorkloadId>>* deferred);
  enum class Outcome { kAdmitted, kDeferred, kPending };
  Outcome TryAdmit(WorkloadId w, int pass);
  void Commit(WorkloadId w, PlacementPlan plan, bool borrowing);
  // Preempts a preemptor's victims and makes it wait for them, holding the room of `plan`.
  void PreemptFor(WorkloadId w, int32_t pods, const std::vector<VictimCandidate>& victims,
                  PlacementPlan plan);
  // Holds the room of a workload that waits for victims: what of `plan` is free now is no one
  // else's for the rest of the cycle. Reported as its nomination.
  void HoldFor(WorkloadId w, PlacementPlan plan);
  void Preempt(WorkloadId victim, PreemptReason reason, WorkloadId preemptor, std::string message);
  void Pend(WorkloadId w, PendingReason reason, std::string message,
            std::vector<std::string> details = {});
  void Pend(WorkloadId w, PendingReason reason,
            std::shared_ptr<const PendingExplanation> explanation);

  const Snapshot& s_;
  const EngineConfig& cfg_;
  const Policies& pol_;
  const bool keep_;
  bool explain_ = true;
  int32_t pending_count_ = 0;
  QueueTree tree_;
  ClusterState state_;
  FeasibilityCache feas_;
  CapacityOverlay releasing_;

  QueueAccounting queues_;
  LoadedWork work_;
  AdmissionChecks admission_;
  AnySorter sorter_;
  QueueTurns turns_;
  PreemptionPlanner planner_;
  Explainer explainer_;
  std::vector<uint8_t> no_fit_;          // per shape: found not to fit on free capacity
  std::vector<int32_t> touched_shapes_;  // shapes with no_fit_ set this cycle
  CycleResult out_;
};

}  // namespace chamber::core
