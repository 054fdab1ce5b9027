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
//
// Engine::Schedule derives everything from the snapshot it is given. EngineSession keeps a
// snapshot and what a cycle derives from it, changed workload by workload, for a caller that
// changes little between cycles (the simulator); it decides exactly as Schedule does.
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

// What a cycle reports besides its decisions.
struct CycleOptions {
  // Why each waiting workload waits, its place in its queue, and each queue's status. A caller
  // that reads none of it turns it off: CycleResult::pending and ::queues stay empty, and
  // CycleStats::pending still counts the workloads that wait. A strict-FIFO queue blocked at
  // its head then costs the cycle one placement try, not a decision per workload behind it.
  bool explain = true;
};

class Engine {
 public:
  explicit Engine(EngineConfig config = {}, Policies policies = DefaultPolicies(),
                  EngineTuning tuning = {});

  CycleResult Schedule(const Snapshot& snapshot, const CycleOptions& options = {}) const;

  const EngineConfig& config() const { return config_; }

 private:
  friend class EngineSession;
  EngineConfig config_;
  Policies policies_;
  EngineTuning tuning_;
};

// A snapshot kept between cycles together with what a cycle derives from it: each workload's
// holdings, its place in its queue's order, what it asks for. Every change goes through the
// methods below, so the next cycle reloads only the workloads that changed (everything when
// nodes or queues changed), and a cycle whose waiting work stays where it was costs what it
// decides rather than what waits. Schedule() decides exactly as Engine::Schedule over
// snapshot() does; the property test EngineSessionProperty checks that over random changes.
class EngineSession {
 public:
  // `engine` must outlive the session.
  EngineSession(const Engine& engine, Snapshot snapshot);
  ~EngineSession();
  EngineSession(const EngineSession&) = delete;
  EngineSession& operator=(const EngineSession&) = delete;

  const Snapshot& snapshot() const;

  void SetNow(Time now);
  // A node or the queues to change: what the cycle derives from them is rebuilt.
  Node& MutableNode(NodeId n);
  std::vector<Queue>& MutableQueues();
  // Appends a workload; returns its index.
  WorkloadId AddWorkload(Workload w);
  // The workload to change; the reference is valid until the next call on the session.
  Workload& MutableWorkload(WorkloadId w);
  // Removes a workload. The last workload takes its index.
  void RemoveWorkload(WorkloadId w);

  CycleResult Schedule(const CycleOptions& options = {});
  // A cycle over snapshot() that loads every workload afresh, as Engine::Schedule does, and
  // leaves the kept state as it is: the same decisions as Schedule, for comparison.
  CycleResult ScheduleAfresh(const CycleOptions& options = {});

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Why a workload's spec cannot be scheduled, or an empty string when it can. With the snapshot's
// MIG profiles, a pod set's MIG devices are checked against them too.
std::string ValidateWorkload(const Workload& w,
                             const std::vector<MigResource>* mig_profiles = nullptr);

}  // namespace chamber::core
