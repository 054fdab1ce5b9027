// The engine: one scheduling cycle over a snapshot, returning decisions. Pure, deterministic and
// single-threaded: no I/O, no clock (time comes in the snapshot), no randomness. Everything that
// schedules in Chamber (the daemon, the simulator, the demo, the benchmarks) calls this.
//
// A cycle:
//   1. Validate queues (QueueTree) and workloads; bad ones become Pending with the cause.
//   2. Record what running work holds (ClusterState); work on a failed GPU is preempted
//      (HardwareFault).
//   3. Fair share per queue (FairSharePolicy) from what each queue holds and waits for.
//   4. Pass 1, "deserved": queues are served in order of priority, then how far below their fair
//      share they are (dominant resource, optionally weighted by decayed recent usage); within a
//      queue by workload priority, then submit time. A workload within its queue's fair share
//      (or reserved, within quota) is placed (PlacementPolicy); if it does not fit, a queue
//      below quota reclaims what others borrowed and higher priority preempts lower priority in
//      the same queue (VictimSelector). Elastic work beyond fair share is deferred.
//   5. Pass 2, "backfill": deferred elastic work borrows whatever is still free, within queue
//      limits and lending limits, without preempting anyone outside its own queue.
//   6. Everything still waiting gets a reason, a message and its position in its queue.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "core/decision.h"
#include "core/fair_share.h"
#include "core/model.h"
#include "core/placement.h"
#include "core/preemption.h"

namespace chamber::core {

struct Policies {
  std::shared_ptr<const FairSharePolicy> fair_share;
  std::shared_ptr<const PlacementPolicy> placement;
  std::shared_ptr<const VictimSelector> victims;
};

// Water-filling fair share, topology-aware bin packing, minimal victims.
Policies DefaultPolicies();

// How the engine computes, never what it decides: every setting gives the same decisions.
struct EngineTuning {
  // A cycle answers its first single-pod reclaim searches by scanning every candidate; after
  // this many it builds a victim index (VictimIndex) and answers the rest from it, at a cost of
  // about the nodes a search must look at rather than every running workload it could take.
  // 0: never.
  int32_t victim_index_after = 16;
};

class Engine {
 public:
  explicit Engine(EngineConfig config = {}, Policies policies = DefaultPolicies(),
                  EngineTuning tuning = {});

  CycleResult Schedule(const Snapshot& snapshot) const;

  const EngineConfig& config() const { return config_; }

 private:
  EngineConfig config_;
  Policies policies_;
  EngineTuning tuning_;
};

// Why a workload's spec cannot be scheduled, or an empty string when it can.
std::string ValidateWorkload(const Workload& w);

}  // namespace chamber::core
