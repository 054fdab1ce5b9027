// Victim selection: which running workloads to preempt so that a waiting one can be placed.
// The engine decides who may be a victim (elastic, past its minimum runtime, within its
// preemption budget, in a queue that borrowed or of lower priority); the selector decides which
// of them, minimising in order the number of victims, their priority and the GPU-hours they lose.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/cluster_state.h"
#include "core/decision.h"
#include "core/placement.h"

namespace chamber::core {

struct VictimCandidate {
  WorkloadId workload;
  PreemptReason reason = PreemptReason::kReclaim;
  int32_t priority = 0;
  double gpu_hours_lost = 0;
  double queue_overshare = 0;  // its queue's usage over fair share; reclaim takes from the highest
  // The workload's pod placements. The engine passes a compact copy because selection reads those
  // of every candidate for every preemptor; left empty, they are read from the snapshot.
  std::span<const PodPlacement> placements;
};

struct VictimSet {
  std::vector<VictimCandidate> victims;
  PlacementPlan plan;  // where the preemptor goes once they are gone
};

class VictimSelector {
 public:
  virtual ~VictimSelector() = default;
  virtual std::string_view name() const = 0;
  // Victims among `candidates` whose release lets the first `pods` pods of `preemptor` be placed,
  // counting free capacity and `releasing` (capacity already on its way back).
  virtual std::optional<VictimSet> Select(const ClusterState& state, FeasibilityCache& feasibility,
                                          const PlacementPolicy& placement,
                                          const Snapshot& snapshot, const Workload& preemptor,
                                          int32_t pods, std::vector<VictimCandidate> candidates,
                                          const CapacityOverlay& releasing) const = 0;
};

// A single pod: the node where the fewest, lowest-priority, least-progressed victims make room.
// A gang: victims taken greedily in preference order until it fits, then every victim whose
// release turns out unnecessary is spared again.
class MinimalVictimSelector final : public VictimSelector {
 public:
  std::string_view name() const override { return "minimal-victims"; }
  std::optional<VictimSet> Select(const ClusterState& state, FeasibilityCache& feasibility,
                                  const PlacementPolicy& placement, const Snapshot& snapshot,
                                  const Workload& preemptor, int32_t pods,
                                  std::vector<VictimCandidate> candidates,
                                  const CapacityOverlay& releasing) const override;
};

}  // namespace chamber::core
